kernel attn(Q: f16[64,1,128], K: f16[64,128,4096]) {
  A = matmul(Q, K)
  S = softmax(A, dim=3)
  return S
}
