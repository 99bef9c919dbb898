# A small RMSNorm+Linear for the search tests: matmul(rms_norm(X), W).
kernel rmsnorm_linear_small(X: f16[4,256], W: f16[256,384]) {
  N = rms_norm(X, dim=1)
  Y = matmul(N, W)
  return Y
}
