# Seed: flash-decoding: online-softmax accumulators in a block op, the splits combined at the kernel level.
kernel small_split_kv(Q: f16[4,1,64], K: f16[4,64,256], V: f16[4,256,64]) {
  Os, Ls, Ms = block(Q, K, V) grid=[4,2,1] threads=128 loop=2 {
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
    Lacc = acc_rescale_sum(l, m)
    Oacc = acc_rescale_sum(o, m)
    save(Oacc, omap=[0,1,-])
    save(Lacc, omap=[0,1,-])
    save(M, omap=[0,1,-])
  }
  Mg = reduce_max(Ms, dim=1)
  Dm = sub(Ms, Mg)
  Wt = exp(Dm)
  OW = mul(Os, Wt)
  LW = mul(Ls, Wt)
  Num = reduce_sum(OW, dim=1)
  Den = reduce_sum(LW, dim=1)
  O = div(Num, Den)
  return O
}
