# RMSNorm followed by a linear layer, batch b=1: X(2b,4096) W(4096,6144), matmul(rms_norm(X), W).
kernel rmsnorm_linear_b1(X: f16[2,4096], W: f16[4096,6144]) {
  N = rms_norm(X, dim=1)
  Y = matmul(N, W)
  return Y
}
