kernel mlp(X: f16[8,4096], W_gate: f16[4096,4096]) {
  Y = matmul(X, Wgate)
  return Y
}
