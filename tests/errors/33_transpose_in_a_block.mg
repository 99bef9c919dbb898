kernel k(X: f16[4,4]) {
  Y = block(X) grid=[1,1,1] threads=32 loop=1 {
    x = iter(X, imap=[-,-,-])
    t = transpose(x)
    a = acc_sum(t)
    save(a, omap=[-,-,-])
  }
  return Y
}
