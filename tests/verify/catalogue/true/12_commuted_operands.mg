# Reordered operands of commutative ops (mul, add, max in a reduction is not touched): mul(Y, X), add(X, Z).
kernel ref(X: f32[4,8], Y: f32[4,8], W: f32[8,4]) {
  Z = mul(X, Y)
  S = add(Z, X)
  P = matmul(S, W)
  return Z, P
}

kernel cand(X: f32[4,8], Y: f32[4,8], W: f32[8,4]) {
  Z = mul(Y, X)
  S = add(X, Z)
  P = matmul(S, W)
  return Z, P
}
