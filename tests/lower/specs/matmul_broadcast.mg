# Rank-4 matmul with broadcast batch dims (A's second batch dim is 1, B has one batch dim) and a matmul of a
# tensor with itself.
kernel matmul_broadcast(A: f32[2,1,17,40], B: f32[3,40,9], S: bf16[33,33]) {
  C = matmul(A, B)
  S2 = matmul(S, S)
  return C, S2
}
