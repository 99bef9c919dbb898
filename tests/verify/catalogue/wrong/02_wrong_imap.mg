# WRONG: split-K with W's imap [0,1,-] instead of [1,0,-]: grid x picks W's K chunk and grid y its column tile.
kernel ref(X: f16[4,16], W: f16[16,16]) {
  Y = matmul(X, W)
  return Y
}

kernel cand(X: f16[4,16], W: f16[16,16]) {
  P = block(X, W) grid=[2,2,1] threads=64 loop=2 {
    x = iter(X, imap=[-,1,-], fmap=1)
    w = iter(W, imap=[0,1,-], fmap=0)
    p = matmul(x, w)
    a = acc_sum(p)
    save(a, omap=[1,0,-])
  }
  Y = reduce_sum(P, dim=0, to=4)
  return Y
}
