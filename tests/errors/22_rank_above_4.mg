kernel act(X: f16[2,4,8,16,32]) {
  Y = silu(X)
  return Y
}
