# Elementwise ops with numpy broadcasting over odd extents, and every unary op of the op table.
kernel ragged_elementwise(A: f16[3,77], B: f16[77], C: f16[3,1]) {
  S = add(A, B)
  D = sub(S, C)
  P = mul(D, B)
  C2 = square(C)
  C3 = add_scalar(C2, s=1.5)
  Q = div(P, C3)
  Q4 = mul_scalar(Q, s=0.25)
  E = exp(Q4)
  E2 = square(E)
  E3 = add_scalar(E2, s=0.5)
  R = sqrt(E3)
  T = rsqrt(R)
  U = silu(T)
  V = gelu(U)
  VB = sub(V, B)
  W = relu(VB)
  return W
}
