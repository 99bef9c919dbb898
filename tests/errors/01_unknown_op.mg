kernel attn(Q: f16[64,1,128], K: f16[64,128,4096]) {
  A = matmul(Q, K)
  S = softmx(A, dim=2)
  return S
}
