# Elementwise ops over a shape large enough for many blocks, with a broadcast operand of lower rank.
kernel elementwise_large(X: f16[33,1,300], Y: f16[7,300]) {
  S = add(X, Y)
  E = exp(Y)
  D = div(S, E)
  return D
}
