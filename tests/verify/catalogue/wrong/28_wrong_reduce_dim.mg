# WRONG: normalizes by the column sums (dim 0) instead of the row sums (dim 1) of a square matrix.
kernel ref(X: f32[8,8]) {
  S = reduce_sum(X, dim=1)
  Y = div(X, S)
  return Y
}

kernel cand(X: f32[8,8]) {
  S = reduce_sum(X, dim=0)
  Y = div(X, S)
  return Y
}
