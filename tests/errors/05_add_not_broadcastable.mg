kernel res(X: f16[8,4096], B: f16[8,1024]) {
  Y = add(X, B)
  return Y
}
