# Two addressable operands, a product that is not.
kernel outer(A: f16[33554432,1], B: f16[1,33554432]) {
  Y = matmul(A, B)
  return Y
}
