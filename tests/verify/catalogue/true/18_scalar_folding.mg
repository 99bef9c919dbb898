# Folded scalar constants: (x * 0.5) * 0.25 = x * 0.125 and (x + 1) + 2 = x + 3.
kernel ref(X: f16[4,8]) {
  A = mul_scalar(X, s=0.5)
  B = mul_scalar(A, s=0.25)
  C = add_scalar(B, s=1)
  D = add_scalar(C, s=2)
  return D
}

kernel cand(X: f16[4,8]) {
  B = mul_scalar(X, s=0.125)
  D = add_scalar(B, s=3)
  return D
}
