# Sums and maxima over odd dims, inner and outer, with and without `to` groups.
kernel ragged_reduce(X: f16[3,1000], Y: f16[77,6]) {
  S = reduce_sum(X, dim=1)
  M = reduce_max(X, dim=1)
  T = reduce_sum(Y, dim=0)
  N = reduce_max(Y, dim=0)
  G = reduce_sum(X, dim=1, to=8)
  return S, M, T, N, G
}
