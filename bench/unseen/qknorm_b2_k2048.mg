# Unseen shape of the qknorm family: 4 heads of 128 query rows, head dim 64, 2048 keys.
kernel qknorm_b2_k2048(Q: f16[4,128,64], K: f16[4,64,2048], V: f16[4,2048,64]) {
  QN = rms_norm(Q, dim=2)
  KN = rms_norm(K, dim=1)
  A = matmul(QN, KN)
  S = softmax(A, dim=2)
  O = matmul(S, V)
  return O
}
