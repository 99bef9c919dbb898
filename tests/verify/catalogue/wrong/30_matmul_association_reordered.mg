# WRONG: (A B) C rewritten as A (C B): reassociated and reordered.
kernel ref(A: f16[8,8], B: f16[8,8], C: f16[8,8]) {
  AB = matmul(A, B)
  Y = matmul(AB, C)
  return Y
}

kernel cand(A: f16[8,8], B: f16[8,8], C: f16[8,8]) {
  CB = matmul(C, B)
  Y = matmul(A, CB)
  return Y
}
