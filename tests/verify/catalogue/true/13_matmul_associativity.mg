# Matmul associativity: (A B) C = A (B C).
kernel ref(A: f16[4,8], B: f16[8,8], C: f16[8,4]) {
  AB = matmul(A, B)
  Y = matmul(AB, C)
  return Y
}

kernel cand(A: f16[4,8], B: f16[8,8], C: f16[8,4]) {
  BC = matmul(B, C)
  Y = matmul(A, BC)
  return Y
}
