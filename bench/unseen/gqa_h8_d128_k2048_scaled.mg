# Unseen shape of the gqa family: 8 KV heads, each shared by 128 query rows (a group's queries stacked), head dim
# 128, 2048 keys, logits scaled by 1/sqrt(128) as attention layers do.
kernel gqa_h8_d128_k2048_scaled(Q: f16[8,128,128], K: f16[8,128,2048], V: f16[8,2048,128]) {
  A = matmul(Q, K)
  Z = mul_scalar(A, s=0.08838834764831845)
  S = softmax(Z, dim=2)
  O = matmul(S, V)
  return O
}
