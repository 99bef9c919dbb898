# WRONG: exp(a + b) rewritten as exp(a) + exp(b).
kernel ref(A: f32[4,8], B: f32[4,8]) {
  S = add(A, B)
  Y = exp(S)
  return Y
}

kernel cand(A: f32[4,8], B: f32[4,8]) {
  EA = exp(A)
  EB = exp(B)
  Y = add(EA, EB)
  return Y
}
