# spec: examples/mugraphs/matmul.mg
# Split-K matmul. Grid x tiles the 1024 columns (8 x 128), grid y cuts K
# into 4 chunks that the for-loop walks in 8 steps of 128; the second kernel adds the 4 stacked partial products.
kernel matmul_split_k(X: f16[64,4096], W: f16[4096,1024]) {
  P = block(X, W) grid=[8,4,1] threads=128 loop=8 {
    x = iter(X, imap=[-,1,-], fmap=1)
    w = iter(W, imap=[1,0,-], fmap=0)
    p = matmul(x, w)
    a = acc_sum(p)
    save(a, omap=[1,0,-])
  }
  Y = reduce_sum(P, dim=0, to=64)
  return Y
}
