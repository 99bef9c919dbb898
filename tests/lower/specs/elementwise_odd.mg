# Elementwise ops with numpy broadcasting over odd shapes: every unary op, every binary op, scalars.
kernel elementwise_odd(X: f32[7,1,13], Y: f32[5,13], Z: f32[7,5,1]) {
  S = add(X, Y)
  D = div(S, Z)
  M = mul(D, X)
  U = sub(Y, M)
  E = exp(U)
  Q = square(E)
  R = add_scalar(Q, s=1.5)
  T = sqrt(R)
  V = rsqrt(R)
  W = mul_scalar(V, s=-0.375)
  G = gelu(W)
  L = silu(T)
  P = relu(G)
  O = add(L, P)
  return O, T
}
