# Decode attention with one query row per head (8 heads, 1024 keys, head dim 128): the spec of
# examples/mugraphs/attention_decode_one_row_flash.mg.
kernel decode_one_row(Q: f16[8,1,128], K: f16[8,128,1024], V: f16[8,1024,128]) {
  A = matmul(Q, K)
  S = softmax(A, dim=2)
  O = matmul(S, V)
  return O
}
