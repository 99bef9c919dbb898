# WRONG: online softmax whose kernel ops divide by the last chunk's denominator rescaled (acc_max of l) rather than the rescaled sum over chunks.
kernel ref(X: f16[4,32]) {
  S = softmax(X, dim=1)
  return S
}

kernel cand(X: f16[4,32]) {
  M, L = block(X) grid=[4,1,1] threads=32 loop=4 {
    x = iter(X, imap=[0,-,-], fmap=1)
    m = reduce_max(x, dim=1)
    d = sub(x, m)
    e = exp(d)
    l = reduce_sum(e, dim=1)
    Mx = acc_max(m)
    La = acc_max(l)
    save(Mx, omap=[0,-,-])
    save(La, omap=[0,-,-])
  }
  D = sub(X, M)
  E = exp(D)
  S = div(E, L)
  return S
}
