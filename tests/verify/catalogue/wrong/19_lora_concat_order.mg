# WRONG: LoRA in concat form with the halves of the weight concat in the wrong order, (X | XA)(B ; W) instead of (X | XA)(W ; B).
kernel ref(X: f16[4,16], W: f16[16,32], A: f16[16,4], B: f16[4,32]) {
  XW = matmul(X, W)
  XA = matmul(X, A)
  XAB = matmul(XA, B)
  Y = add(XW, XAB)
  return Y
}

kernel cand(X: f16[4,16], W: f16[16,32], A: f16[16,4], B: f16[4,32]) {
  XA = matmul(X, A)
  L = concat(X, XA, dim=1)
  R = concat(B, W, dim=0)
  Y = matmul(L, R)
  return Y
}
