# WRONG: split-K accumulates the K chunks with acc_max instead of acc_sum.
kernel ref(X: f16[4,32], W: f16[32,16]) {
  Y = matmul(X, W)
  return Y
}

kernel cand(X: f16[4,32], W: f16[32,16]) {
  P = block(X, W) grid=[2,2,1] threads=64 loop=2 {
    x = iter(X, imap=[-,1,-], fmap=1)
    w = iter(W, imap=[1,0,-], fmap=0)
    p = matmul(x, w)
    a = acc_max(p)
    save(a, omap=[1,0,-])
  }
  Y = reduce_sum(P, dim=0, to=4)
  return Y
}
