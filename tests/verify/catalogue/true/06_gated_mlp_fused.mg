# Gated MLP silu(X W1) * (X W2) with both matmuls in one block graph: grid x over 2 column tiles, the for-loop walks
# K in 4 steps accumulating both products; the epilogue applies silu and the product.
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
    a1 = acc_sum(p1)
    a2 = acc_sum(p2)
    g = silu(a1)
    y = mul(g, a2)
    save(y, omap=[1,-,-])
  }
  return Y
}
