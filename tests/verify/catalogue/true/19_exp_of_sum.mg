# exp(a + b) = exp(a) * exp(b), in f32.
kernel ref(A: f32[4,8], B: f32[4,8]) {
  S = add(A, B)
  Y = exp(S)
  return Y
}

kernel cand(A: f32[4,8], B: f32[4,8]) {
  EA = exp(A)
  EB = exp(B)
  Y = mul(EA, EB)
  return Y
}
