# Gated MLP: X(8,4096) W1,W2(4096,4096), silu(X W1) * (X W2) elementwise.
kernel gated_mlp(X: f16[8,4096], W1: f16[4096,4096], W2: f16[4096,4096]) {
  G = matmul(X, W1)
  U = matmul(X, W2)
  S = silu(G)
  Y = mul(S, U)
  return Y
}
