kernel k(X: f16[64]) {
  Y = transpose(X)
  return Y
}
