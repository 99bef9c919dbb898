# QKNorm attention, batch b=8: GQA with rms_norm on Q (over its last dim) and on K (over its head dim, dim 1).
kernel qknorm_b8(Q: f16[16,256,64], K: f16[16,64,4096], V: f16[16,4096,64]) {
  QN = rms_norm(Q, dim=2)
  KN = rms_norm(K, dim=1)
  A = matmul(QN, KN)
  S = softmax(A, dim=2)
  O = matmul(S, V)
  return O
}
