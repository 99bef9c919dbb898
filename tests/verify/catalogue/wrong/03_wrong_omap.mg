# WRONG: the output tile of block (x, y) is saved with omap [1,0,-] instead of [0,1,-]: the 4x4 tile for rows x, columns y lands at rows y, columns x.
kernel ref(X: f16[8,16], W: f16[16,8]) {
  Y = matmul(X, W)
  return Y
}

kernel cand(X: f16[8,16], W: f16[16,8]) {
  Y = block(X, W) grid=[2,2,1] threads=64 loop=2 {
    x = iter(X, imap=[0,-,-], fmap=1)
    w = iter(W, imap=[-,1,-], fmap=0)
    p = matmul(x, w)
    a = acc_sum(p)
    save(a, omap=[1,0,-])
  }
  return Y
}
