# Transposes of inputs, of an intermediate and of the result, as predefined ops.
kernel transposed(X: f16[2,64,32], W: f16[128,32], V: f16[64,48]) {
  Wt = transpose(W)
  Y = matmul(X, Wt)
  Yt = transpose(Y)
  Z = matmul(Yt, V)
  Zt = transpose(Z)
  return Zt
}
