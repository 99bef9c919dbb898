# A small attention for the search tests: softmax(Q K) V over 512 keys.
kernel attention_small(Q: f16[2,16,32], K: f16[2,32,512], V: f16[2,512,32]) {
  A = matmul(Q, K)
  S = softmax(A, dim=2)
  O = matmul(S, V)
  return O
}
