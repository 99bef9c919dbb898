# Unseen shape of the LoRA family, issue 14's: rank 64 at LLaMA size. The search finds no complete fused μGraph
# (1.2 M states) and answers with its partial-fusion fallback (search/partial_fusion.h).
kernel lora_r64_llama(X: f16[16,4096], W: f16[4096,4096], A: f16[4096,64], B: f16[64,4096]) {
  XW = matmul(X, W)
  XA = matmul(X, A)
  XAB = matmul(XA, B)
  Y = add(XW, XAB)
  return Y
}
