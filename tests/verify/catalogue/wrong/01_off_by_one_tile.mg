# WRONG: W's tile walks its columns with the for-loop and its K rows with the grid (imap/fmap swapped), so block b multiplies every X chunk by the same K rows 8b..8b+7: one K chunk is duplicated, the other skipped.
kernel ref(X: f16[4,16], W: f16[16,16]) {
  Y = matmul(X, W)
  return Y
}

kernel cand(X: f16[4,16], W: f16[16,16]) {
  Y = block(X, W) grid=[2,1,1] threads=64 loop=2 {
    x = iter(X, imap=[-,-,-], fmap=1)
    w = iter(W, imap=[0,-,-], fmap=1)
    p = matmul(x, w)
    a = acc_sum(p)
    save(a, omap=[1,-,-])
  }
  return Y
}
