# WRONG: matmul(W, X) instead of matmul(X, W) on square matrices (matmul does not commute).
kernel ref(X: f16[8,8], W: f16[8,8]) {
  Y = matmul(X, W)
  return Y
}

kernel cand(X: f16[8,8], W: f16[8,8]) {
  Y = matmul(W, X)
  return Y
}
