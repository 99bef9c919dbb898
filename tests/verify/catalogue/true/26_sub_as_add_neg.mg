# x - y = x + (-1) * y.
kernel ref(X: f16[4,8], Y: f16[4,8]) {
  D = sub(X, Y)
  return D
}

kernel cand(X: f16[4,8], Y: f16[4,8]) {
  N = mul_scalar(Y, s=-1)
  D = add(X, N)
  return D
}
