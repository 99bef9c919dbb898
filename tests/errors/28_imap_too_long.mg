kernel lin(X: f16[64,4096], W: f16[4096,1024]) {
  Y = block(X, W) grid=[8,1,1] threads=128 loop=16 {
    x = iter(X, imap=[-,-,-,-], fmap=1)
    w = iter(W, imap=[1,-,-], fmap=0)
    p = matmul(x, w)
    a = acc_sum(p)
    save(a, omap=[1,-,-])
  }
  return Y
}
