# Transposes are views (no kernel): the products read their operands through swapped strides, a transposed
# intermediate is read where its producer wrote it, and a returned transpose is copied out.
kernel transposed(X: f16[2,64,32], W: f16[128,32], V: f16[64,48]) {
  Wt = transpose(W)
  Y = matmul(X, Wt)
  Yt = transpose(Y)
  Z = matmul(Yt, V)
  Zt = transpose(Z)
  return Zt
}

# One latent cache read both ways, as multi-head latent attention does: the scores against its transpose, the
# output from it, a 2-D operand broadcast across the heads.
kernel latent(Q: f16[4,1,32], C: f16[64,32]) {
  Ct = transpose(C)
  A = matmul(Q, Ct)
  S = softmax(A, dim=2)
  O = matmul(S, C)
  return O
}
