# concat along the last and the first dim, of odd extents.
kernel concat_odd(A: f16[5,77], B: f16[5,13], C: f16[3,90]) {
  X = concat(A, B, dim=1)
  Y = concat(X, C, dim=0)
  return Y
}
