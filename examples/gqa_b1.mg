# Group-query attention, batch b=1: Q(2b,256,64) K(2b,64,4096) V(2b,4096,64), softmax(QK)V.
kernel gqa_b1(Q: f16[2,256,64], K: f16[2,64,4096], V: f16[2,4096,64]) {
  A = matmul(Q, K)
  S = softmax(A, dim=2)
  O = matmul(S, V)
  return O
}
