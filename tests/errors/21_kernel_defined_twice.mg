kernel lin(X: f16[8,4096], W: f16[4096,1024]) {
  Y = matmul(X, W)
  return Y
}

kernel lin(X: f16[8,4096], W: f16[4096,1024]) {
  Y = matmul(X, W)
  Z = silu(Y)
  return Z
}
