# LoRA: XW + (XA)B, four ops; with one kernel op of at most three block ops no complete fused μGraph exists, so the
# answer comes from the partial-fusion fallback.
kernel lora_small(X: f16[16,256], W: f16[256,1024], A: f16[256,16], B: f16[16,1024]) {
  XW = matmul(X, W)
  XA = matmul(X, A)
  XAB = matmul(XA, B)
  Y = add(XW, XAB)
  return Y
}
