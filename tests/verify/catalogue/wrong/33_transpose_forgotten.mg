# WRONG: the block reads W where the spec multiplies by its transpose (square, so the shapes agree).
kernel ref(X: f16[2,16,16], W: f16[16,16]) {
  Wt = transpose(W)
  Y = matmul(X, Wt)
  return Y
}

kernel cand(X: f16[2,16,16], W: f16[16,16]) {
  Y = block(X, W) grid=[2,2,1] threads=32 loop=2 {
    x = iter(X, imap=[0,1,-], fmap=2)
    w = iter(W, imap=[-,-,-], fmap=0)
    p = matmul(x, w)
    a = acc_sum(p)
    save(a, omap=[0,1,-])
  }
  return Y
}
