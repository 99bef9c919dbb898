# Decode attention (Mirage's announcement example): 64 heads, one query row, 4096 keys, head dim 128.
kernel attention_decode(Q: f16[64,1,128], K: f16[64,128,4096], V: f16[64,4096,128]) {
  A = matmul(Q, K)
  S = softmax(A, dim=2)
  O = matmul(S, V)
  return O
}
