# WRONG: A (B + C) rewritten as A B + C (the factor A dropped from one term).
kernel ref(A: f32[8,8], B: f32[8,8], C: f32[8,8]) {
  BC = add(B, C)
  Y = matmul(A, BC)
  return Y
}

kernel cand(A: f32[8,8], B: f32[8,8], C: f32[8,8]) {
  AB = matmul(A, B)
  Y = add(AB, C)
  return Y
}
