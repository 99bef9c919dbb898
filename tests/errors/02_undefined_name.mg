kernel mlp(X: f16[8,4096], W: f16[4096,4096]) {
  Y = matmul(X, W1)
  return Y
}
