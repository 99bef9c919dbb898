# WRONG: rms_norm written out without eps (rsqrt(sum(x^2) / n)).
kernel ref(X: f16[4,16]) {
  Y = rms_norm(X, dim=1)
  return Y
}

kernel cand(X: f16[4,16]) {
  S = square(X)
  T = reduce_sum(S, dim=1)
  M = mul_scalar(T, s=0.0625)
  R = rsqrt(M)
  Y = mul(X, R)
  return Y
}
