# Unseen shape of the rmsnorm_linear family: 4 rows, 4096 -> 11008 (a LLaMA-7B MLP width).
kernel rmsnorm_linear_b4_n11008(X: f16[4,4096], W: f16[4096,11008]) {
  N = rms_norm(X, dim=1)
  Y = matmul(N, W)
  return Y
}
