# Multi-head latent attention, absorbed decode form (DeepSeek-V2 style): 16 heads of dim 128, one query row each,
# a latent cache C of 4096 tokens x 512 shared by all heads. The up-projections are absorbed into the query and
# the output: O = softmax((Q·W_uk)·Cᵀ · s)·C·W_uv per head, s = 1/sqrt(192) (the model's query-key head dim, 128
# + 64 rotary; the rotary part is left out here).
kernel mla_decode(Q: f16[16,1,128], Wuk: f16[16,128,512], C: f16[4096,512], Wuv: f16[16,512,128]) {
  Ql = matmul(Q, Wuk)
  Ct = transpose(C)
  A = matmul(Ql, Ct)
  Z = mul_scalar(A, s=0.0721688)
  S = softmax(Z, dim=2)
  L = matmul(S, C)
  O = matmul(L, Wuv)
  return O
}
