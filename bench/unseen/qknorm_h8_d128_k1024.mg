# Unseen shape of the qknorm family: 8 heads of 64 query rows, head dim 128, 1024 keys.
kernel qknorm_h8_d128_k1024(Q: f16[8,64,128], K: f16[8,128,1024], V: f16[8,1024,128]) {
  QN = rms_norm(Q, dim=2)
  KN = rms_norm(K, dim=1)
  A = matmul(QN, KN)
  S = softmax(A, dim=2)
  O = matmul(S, V)
  return O
}
