# Distributivity: A B + A C = A (B + C).
kernel ref(A: f32[4,8], B: f32[8,4], C: f32[8,4]) {
  AB = matmul(A, B)
  AC = matmul(A, C)
  Y = add(AB, AC)
  return Y
}

kernel cand(A: f32[4,8], B: f32[8,4], C: f32[8,4]) {
  BC = add(B, C)
  Y = matmul(A, BC)
  return Y
}
