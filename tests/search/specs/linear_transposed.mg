# A linear layer with its weight stored as PyTorch stores it, [out, in]: Y = X·Wᵀ.
kernel linear_t(X: f16[16,256], W: f16[512,256]) {
  Wt = transpose(W)
  Y = matmul(X, Wt)
  return Y
}
