# WRONG: operands of the non-commutative sub reordered: (Y - X) W instead of (X - Y) W.
kernel ref(X: f32[4,8], Y: f32[4,8], W: f32[8,4]) {
  D = sub(X, Y)
  P = matmul(D, W)
  return P
}

kernel cand(X: f32[4,8], Y: f32[4,8], W: f32[8,4]) {
  D = sub(Y, X)
  P = matmul(D, W)
  return P
}
