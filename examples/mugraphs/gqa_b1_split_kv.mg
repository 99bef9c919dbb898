# spec: examples/gqa_b1.mg
# Split-KV attention. Block op: grid x over the 2 batch heads, grid y over 8 KV splits
# of 512 keys, for-loop over 16 chunks of 32 keys with online softmax (small chunks keep the [256,32] score tiles
# within one H100/H200 block's shared memory); each split's unnormalized output, denominator
# and running max are stacked along dim 1 (split c holds rows c*256 .. c*256+255). The kernel ops take the row max
# over the splits (reduce_max with to=256), copy it to every split with concat, rescale, add the splits and divide.
kernel gqa_b1_split_kv(Q: f16[2,256,64], K: f16[2,64,4096], V: f16[2,4096,64]) {
  Os, Ls, Ms = block(Q, K, V) grid=[2,8,1] threads=128 loop=16 {
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
  Mg = reduce_max(Ms, dim=1, to=256)
  M2 = concat(Mg, Mg, dim=1)
  M4 = concat(M2, M2, dim=1)
  M8 = concat(M4, M4, dim=1)
  Dm = sub(Ms, M8)
  Wt = exp(Dm)
  OW = mul(Os, Wt)
  LW = mul(Ls, Wt)
  Num = reduce_sum(OW, dim=1, to=256)
  Den = reduce_sum(LW, dim=1, to=256)
  O = div(Num, Den)
  return O
}
