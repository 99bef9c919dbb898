# Unseen shape of the gqa family: 4 KV heads of 128 query rows, head dim 96 (not a power of two), 4096 keys.
kernel gqa_h4_d96_k4096(Q: f16[4,128,96], K: f16[4,96,4096], V: f16[4,4096,96]) {
  A = matmul(Q, K)
  S = softmax(A, dim=2)
  O = matmul(S, V)
  return O
}
