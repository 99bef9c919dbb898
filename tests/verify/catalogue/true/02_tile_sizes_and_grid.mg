# Two μGraphs of one matmul with different tile sizes and grid dims: [2,1,1] x loop 2 (tiles 8x8 of W, whole rows)
# against [4,2,1] x loop 4 (4x4 output tiles, rows split by grid y, K walked in 4 steps).
kernel ref(X: f16[8,32], W: f16[32,16]) {
  Y = block(X, W) grid=[2,1,1] threads=128 loop=2 {
    x = iter(X, imap=[-,-,-], fmap=1)
    w = iter(W, imap=[1,-,-], fmap=0)
    p = matmul(x, w)
    a = acc_sum(p)
    save(a, omap=[1,-,-])
  }
  return Y
}

kernel cand(X: f16[8,32], W: f16[32,16]) {
  Y = block(X, W) grid=[4,2,1] threads=64 loop=4 {
    x = iter(X, imap=[-,0,-], fmap=1)
    w = iter(W, imap=[1,-,-], fmap=0)
    p = matmul(x, w)
    a = acc_sum(p)
    save(a, omap=[1,0,-])
  }
  return Y
}
