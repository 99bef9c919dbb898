# Attention with a head dim of 40, 1000 keys and a batch of 3: no extent is a power of two.
kernel ragged_attention(Q: f16[3,5,40], K: f16[3,40,1000], V: f16[3,1000,40]) {
  A = matmul(Q, K)
  S = softmax(A, dim=2)
  O = matmul(S, V)
  return O
}
