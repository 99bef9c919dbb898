# Seed: a gated MLP with every elementwise op, a concat and reductions.
kernel small_mlp(X: bf16[4,32], W1: bf16[32,16], W2: bf16[32,16]) {
  A = matmul(X, W1)
  B = matmul(X, W2)
  G = silu(A)
  H = gelu(B)
  R = relu(H)
  Y = mul(G, R)
  C = concat(Y, A, dim=1)
  E = exp(C)
  Q = sqrt(E)
  S = square(Q)
  M = mul_scalar(S, s=0.5)
  N = add_scalar(M, s=1e-06)
  D = div(N, E)
  Z = sub(D, C)
  U = reduce_sum(Z, dim=1, to=4)
  V = reduce_max(Z, dim=0)
  return U, V
}
