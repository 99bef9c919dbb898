kernel norm(X: f16[2,4096]) {
  Y = rms_norm(X, dim=1, epsilon=1e-05)
  return Y
}
