# Row sums of 10 rows with ragged tiles: 4 blocks of 3 rows (the last one masked), for-loop over 2 column chunks.
kernel ref(X: f32[10,8]) {
  Y = reduce_sum(X, dim=1)
  return Y
}

kernel cand(X: f32[10,8]) {
  Y = block(X) grid=[4,1,1] threads=32 loop=2 {
    x = iter(X, imap=[0,-,-], fmap=1, mask=true)
    s = reduce_sum(x, dim=1)
    a = acc_sum(s)
    save(a, omap=[0,-,-], shape=[10,1])
  }
  return Y
}
