kernel attn(Q: f16[64,1,128], K: f16[64,4096,128]) {
  A = matmul(Q, K)
  return A
}
