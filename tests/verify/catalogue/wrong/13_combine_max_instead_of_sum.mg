# WRONG: the combining kernel takes the max of the rescaled partial outputs instead of their sum.
kernel ref(Q: f16[2,1,8], K: f16[2,8,32], V: f16[2,32,8]) {
  A = matmul(Q, K)
  S = softmax(A, dim=2)
  O = matmul(S, V)
  return O
}

kernel cand(Q: f16[2,1,8], K: f16[2,8,32], V: f16[2,32,8]) {
  Os, Ls, Ms = block(Q, K, V) grid=[2,2,1] threads=128 loop=2 {
    q = iter(Q, imap=[0,-,-])
    k = iter(K, imap=[0,2,-], fmap=2)
    v = iter(V, imap=[0,1,-], fmap=1)
    s = matmul(q, k)
    m = reduce_max(s, dim=2)
    d = sub(s, m)
    e = exp(d)
    l = reduce_sum(e, dim=2)
    o = matmul(e, v)
    M = acc_max(m)
    La = acc_rescale_sum(l, m)
    Oa = acc_rescale_sum(o, m)
    save(Oa, omap=[0,1,-])
    save(La, omap=[0,1,-])
    save(M, omap=[0,1,-])
  }
  Mg = reduce_max(Ms, dim=1)
  Dm = sub(Ms, Mg)
  Wt = exp(Dm)
  OW = mul(Os, Wt)
  LW = mul(Ls, Wt)
  Num = reduce_max(OW, dim=1)
  Den = reduce_sum(LW, dim=1)
  O = div(Num, Den)
  return O
}
