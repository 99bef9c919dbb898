# LoRA: X(16,256) W(256,4096) A(256,16) B(16,4096), XW + (XA)B.
kernel lora(X: f16[16,256], W: f16[256,4096], A: f16[256,16], B: f16[16,4096]) {
  XW = matmul(X, W)
  XA = matmul(X, A)
  XAB = matmul(XA, B)
  Y = add(XW, XAB)
  return Y
}
