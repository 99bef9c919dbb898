# Unseen shape of the gated_mlp family: 16 rows, 4096 -> 2048.
kernel gated_mlp_b16_n2048(X: f16[16,4096], W1: f16[4096,2048], W2: f16[4096,2048]) {
  G = matmul(X, W1)
  U = matmul(X, W2)
  S = silu(G)
  Y = mul(S, U)
  return Y
}
