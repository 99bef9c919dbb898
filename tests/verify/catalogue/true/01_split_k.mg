# Split-K matmul: grid x tiles the 16 columns (2 x 8), grid y cuts K = 32 into 2 chunks that the for-loop walks in
# 2 steps of 8; the second kernel adds the 2 stacked partial products.
kernel ref(X: f16[4,32], W: f16[32,16]) {
  Y = matmul(X, W)
  return Y
}

kernel cand(X: f16[4,32], W: f16[32,16]) {
  P = block(X, W) grid=[2,2,1] threads=64 loop=2 {
    x = iter(X, imap=[-,1,-], fmap=1)
    w = iter(W, imap=[1,0,-], fmap=0)
    p = matmul(x, w)
    a = acc_sum(p)
    save(a, omap=[1,0,-])
  }
  Y = reduce_sum(P, dim=0, to=4)
  return Y
}
