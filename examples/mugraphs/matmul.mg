# Spec for matmul_split_k.mg: a plain matmul Y = X W.
kernel matmul(X: f16[64,4096], W: f16[4096,1024]) {
  Y = matmul(X, W)
  return Y
}
