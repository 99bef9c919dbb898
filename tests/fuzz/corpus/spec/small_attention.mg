# Seed: attention with rms_norm, softmax and a transpose, small enough to interpret in every execution.
kernel small_attention(Q: f16[2,8,16], K: f16[2,16,32], V: f16[2,32,16]) {
  QN = rms_norm(Q, dim=2)
  KN = rms_norm(K, dim=1)
  A = matmul(QN, KN)
  S = softmax(A, dim=2)
  O = matmul(S, V)
  T = transpose(O)
  return T
}
