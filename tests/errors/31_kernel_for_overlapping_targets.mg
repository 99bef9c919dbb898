# One name may serve several GPUs only when no target is in two of its programs' lists.
kernel lin(X: f16[8,4096], W: f16[4096,1024]) for [h200, h100] {
  Y = matmul(X, W)
  return Y
}

kernel lin(X: f16[8,4096], W: f16[4096,1024]) for [a100, h100] {
  Y = matmul(X, W)
  Z = silu(Y)
  return Z
}
