# Group-query attention, batch b=8: Q(2b,256,64) K(2b,64,4096) V(2b,4096,64), softmax(QK)V.
kernel gqa_b8(Q: f16[16,256,64], K: f16[16,64,4096], V: f16[16,4096,64]) {
  A = matmul(Q, K)
  S = softmax(A, dim=2)
  O = matmul(S, V)
  return O
}
