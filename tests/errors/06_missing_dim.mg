kernel norm(X: f16[2,4096]) {
  Y = rms_norm(X)
  return Y
}
