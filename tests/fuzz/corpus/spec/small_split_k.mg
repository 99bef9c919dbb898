# Seed: a split-K μGraph: a block op with a for-loop and an accumulator, then a kernel-level reduction.
kernel small_split_k(X: f16[16,256], W: f16[256,128]) {
  P = block(X, W) grid=[2,2,1] threads=128 loop=2 {
    x = iter(X, imap=[-,1,-], fmap=1)
    w = iter(W, imap=[1,0,-], fmap=0)
    p = matmul(x, w)
    a = acc_sum(p)
    save(a, omap=[1,0,-])
  }
  Y = reduce_sum(P, dim=0, to=16)
  return Y
}
