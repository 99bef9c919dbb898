# Two matmuls sharing X as one: (X W1 | X W2) = X (W1 | W2).
kernel ref(X: f16[4,16], W1: f16[16,8], W2: f16[16,8]) {
  Y1 = matmul(X, W1)
  Y2 = matmul(X, W2)
  Y = concat(Y1, Y2, dim=1)
  return Y
}

kernel cand(X: f16[4,16], W1: f16[16,8], W2: f16[16,8]) {
  W = concat(W1, W2, dim=1)
  Y = matmul(X, W)
  return Y
}
