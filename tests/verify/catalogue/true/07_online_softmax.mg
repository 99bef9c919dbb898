# Row softmax in two passes: a block op walks each row in 4 chunks with max subtraction and online rescaling
# (acc_max for the running max, acc_rescale_sum for the denominator); kernel ops then form exp(x - M) / L.
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
    La = acc_rescale_sum(l, m)
    save(Mx, omap=[0,-,-])
    save(La, omap=[0,-,-])
  }
  D = sub(X, M)
  E = exp(D)
  S = div(E, L)
  return S
}
