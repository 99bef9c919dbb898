# A small gated MLP for the search tests: silu(X W1) * (X W2), with non-power-of-two sizes.
kernel gated_mlp_small(X: f16[6,192], W1: f16[192,320], W2: f16[192,320]) {
  G = matmul(X, W1)
  U = matmul(X, W2)
  S = silu(G)
  Y = mul(S, U)
  return Y
}
