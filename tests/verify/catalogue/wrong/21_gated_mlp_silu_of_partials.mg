# WRONG: gated MLP applies silu to each K chunk's partial product inside the loop, before the sum over K.
kernel ref(X: f16[4,32], W1: f16[32,16], W2: f16[32,16]) {
  G = matmul(X, W1)
  U = matmul(X, W2)
  S = silu(G)
  Y = mul(S, U)
  return Y
}

kernel cand(X: f16[4,32], W1: f16[32,16], W2: f16[32,16]) {
  Y = block(X, W1, W2) grid=[2,1,1] threads=128 loop=4 {
    x = iter(X, imap=[-,-,-], fmap=1)
    w1 = iter(W1, imap=[1,-,-], fmap=0)
    w2 = iter(W2, imap=[1,-,-], fmap=0)
    p1 = matmul(x, w1)
    p2 = matmul(x, w2)
    g = silu(p1)
    a1 = acc_sum(g)
    a2 = acc_sum(p2)
    y = mul(a1, a2)
    save(y, omap=[1,-,-])
  }
  return Y
}
