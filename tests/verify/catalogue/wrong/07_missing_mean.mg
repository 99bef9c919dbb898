# WRONG: rms_norm written out without the 1/n of the mean (rsqrt(sum(x^2) + eps)).
kernel ref(X: f16[4,16]) {
  Y = rms_norm(X, dim=1)
  return Y
}

kernel cand(X: f16[4,16]) {
  S = square(X)
  T = reduce_sum(S, dim=1)
  E = add_scalar(T, s=1e-06)
  R = rsqrt(E)
  Y = mul(X, R)
  return Y
}
