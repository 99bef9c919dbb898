# Attention against one latent cache C shared by all heads (multi-head latent attention's absorbed form): the scores
# read C through its transpose, the output reads C itself; as one kernel per KV half (all heads as rows of one
# block, the cache read once per split) and a combining kernel.
kernel ref(Q: f16[4,1,16], C: f16[32,16]) {
  Ct = transpose(C)
  A = matmul(Q, Ct)
  S = softmax(A, dim=2)
  O = matmul(S, C)
  return O
}

kernel cand(Q: f16[4,1,16], C: f16[32,16]) {
  Ct = transpose(C)
  P, M, L = block(Q, Ct, C) grid=[2,1,1] threads=32 loop=2 {
    q = iter(Q, imap=[-,-,-])
    kt = iter(Ct, imap=[1,-,-], fmap=1)
    v = iter(C, imap=[0,-,-], fmap=0)
    s = matmul(q, kt)
    m = reduce_max(s, dim=2)
    d = sub(s, m)
    e = exp(d)
    l = reduce_sum(e, dim=2)
    o = matmul(e, v)
    ao = acc_rescale_sum(o, m)
    al = acc_rescale_sum(l, m)
    am = acc_max(m)
    save(ao, omap=[1,-,-])
    save(am, omap=[1,-,-])
    save(al, omap=[1,-,-])
  }
  O = block(P, M, L) grid=[4,1,1] threads=32 loop=1 {
    p = iter(P, imap=[0,-,-])
    m = iter(M, imap=[0,-,-])
    l = iter(L, imap=[0,-,-])
    g = reduce_max(m, dim=1)
    dm = sub(m, g)
    f = exp(dm)
    pf = mul(p, f)
    lf = mul(l, f)
    ps = reduce_sum(pf, dim=1)
    ls = reduce_sum(lf, dim=1)
    o = div(ps, ls)
    a = acc_sum(o)
    save(a, omap=[0,-,-])
  }
  return O
}
