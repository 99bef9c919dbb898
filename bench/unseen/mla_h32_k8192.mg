# Multi-head latent attention at 32 heads and 8192 cached tokens (examples/mla_decode.mg at another shape; session 29).
kernel mla_h32_k8192(Q: f16[32,1,128], Wuk: f16[32,128,512], C: f16[8192,512], Wuv: f16[32,512,128]) {
  Ql = matmul(Q, Wuk)
  Ct = transpose(C)
  A = matmul(Ql, Ct)
  Z = mul_scalar(A, s=0.0721688)
  S = softmax(Z, dim=2)
  L = matmul(S, C)
  O = matmul(L, Wuv)
  return O
}
