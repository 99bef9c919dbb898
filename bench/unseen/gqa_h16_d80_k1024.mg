# Unseen shape of the gqa family: a head dim that is not a power of two (80), 16 KV heads of 64 query rows each,
# 1024 keys.
kernel gqa_h16_d80_k1024(Q: f16[16,64,80], K: f16[16,80,1024], V: f16[16,1024,80]) {
  A = matmul(Q, K)
  S = softmax(A, dim=2)
  O = matmul(S, V)
  return O
}
