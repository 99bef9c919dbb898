kernel lin(X: f16[64,4096], W: f16[4096,1024]) {
  Y = block(X, W) grid=[8,1,1] threads=128 loop=1 {
    x = iter(X, imap=[-,-,-])
    w = iter(W, imap=[1,-,-])
    p = matmul(x, w)
    save(p, omap=[1,-,-])
  }
  return Y
}
