# A batched matmul whose dims divide no tile: K = 1000 and N = 77 are masked, the batch of 3 goes on grid z.
kernel matmul_ragged(A: f16[3,5,1000], B: f16[1000,77]) {
  C = matmul(A, B)
  return C
}
