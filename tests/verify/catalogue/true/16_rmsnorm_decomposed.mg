# rms_norm written out in bf16: x * rsqrt(sum(x^2) / 16 + eps).
kernel ref(X: bf16[4,16]) {
  Y = rms_norm(X, dim=1)
  return Y
}

kernel cand(X: bf16[4,16]) {
  S = square(X)
  T = reduce_sum(S, dim=1)
  M = mul_scalar(T, s=0.0625)
  E = add_scalar(M, s=1e-06)
  R = rsqrt(E)
  Y = mul(X, R)
  return Y
}
