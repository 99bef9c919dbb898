# WRONG: the attention scale 0.25 is applied to Q and again to the logits.
kernel ref(Q: f16[2,4,16], K: f16[2,16,32], V: f16[2,32,8]) {
  A = matmul(Q, K)
  B = mul_scalar(A, s=0.25)
  S = softmax(B, dim=2)
  O = matmul(S, V)
  return O
}

kernel cand(Q: f16[2,4,16], K: f16[2,16,32], V: f16[2,32,8]) {
  QS = mul_scalar(Q, s=0.25)
  A = matmul(QS, K)
  B = mul_scalar(A, s=0.25)
  S = softmax(B, dim=2)
  O = matmul(S, V)
  return O
}
