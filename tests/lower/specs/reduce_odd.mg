# Reductions over odd extents: sum and max over 1000 and 77, and to= groups (77 = 7 x 11, 1000 = 8 x 125).
kernel reduce_odd(X: f16[3,1000,77]) {
  S1 = reduce_sum(X, dim=1)
  M1 = reduce_max(X, dim=1)
  S2 = reduce_sum(X, dim=2)
  M2 = reduce_max(X, dim=-1)
  G2 = reduce_sum(X, dim=2, to=7)
  H1 = reduce_max(X, dim=1, to=8)
  return S1, M1, S2, M2, G2, H1
}
