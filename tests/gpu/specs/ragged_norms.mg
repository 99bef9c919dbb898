# rms_norm over 1000 and softmax over 77 (an inner and an outer dim), then a concat of odd parts.
kernel ragged_norms(X: f16[3,1000], L: f16[3,77], K: f16[77,5]) {
  N = rms_norm(X, dim=1)
  P = softmax(L, dim=1)
  Q = softmax(K, dim=0)
  C = concat(P, L, dim=1)
  return N, Q, C
}
