# Attention against one latent cache shared by 8 heads of one query row each, read through its transpose for the
# scores and as it is for the output, split over the cache; the heads as the rows of one product.
kernel latent(Q: f16[8,1,64], C: f16[512,64]) {
  Ct = transpose(C)
  P, M, L = block(Q, Ct, C) grid=[4,1,1] threads=128 loop=4 {
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
  O = block(P, M, L) grid=[8,1,1] threads=128 loop=1 {
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
