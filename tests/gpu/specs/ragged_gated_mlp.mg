# An RMSNorm followed by a gated MLP, K = 1000 and N = 77.
kernel ragged_gated_mlp(X: f16[3,1000], W1: f16[1000,77], W2: f16[1000,77]) {
  H = rms_norm(X, dim=1)
  G = matmul(H, W1)
  U = matmul(H, W2)
  SG = silu(G)
  Y = mul(SG, U)
  return Y
}
