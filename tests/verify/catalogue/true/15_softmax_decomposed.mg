# Softmax written out at kernel level with max subtraction: exp(x - max) / sum(exp(x - max)).
kernel ref(X: f16[4,32]) {
  S = softmax(X, dim=1)
  return S
}

kernel cand(X: f16[4,32]) {
  M = reduce_max(X, dim=1)
  D = sub(X, M)
  E = exp(D)
  L = reduce_sum(E, dim=1)
  S = div(E, L)
  return S
}
