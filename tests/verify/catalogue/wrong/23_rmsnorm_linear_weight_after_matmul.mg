# WRONG: the RMSNorm weight g scales the output columns of the linear layer instead of its input features.
kernel ref(X: f16[4,32], G: f16[32], W: f16[32,32]) {
  N = rms_norm(X, dim=1)
  NG = mul(N, G)
  Y = matmul(NG, W)
  return Y
}

kernel cand(X: f16[4,32], G: f16[32], W: f16[32,32]) {
  N = rms_norm(X, dim=1)
  P = matmul(N, W)
  Y = mul(P, G)
  return Y
}
