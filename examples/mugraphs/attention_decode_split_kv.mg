# spec: examples/attention_decode.mg
# Split-KV (flash-decoding) attention. Block op: grid x over the 64 heads,
# grid y over 16 KV splits of 256 keys, for-loop over 4 chunks of 64 keys with online softmax; it saves each split's
# unnormalized output, softmax denominator and running max, stacked along dim 1. The kernel ops then rescale the
# 16 splits to the global max and divide.
kernel attention_decode_split_kv(Q: f16[64,1,128], K: f16[64,128,4096], V: f16[64,4096,128]) {
  Os, Ls, Ms = block(Q, K, V) grid=[64,16,1] threads=128 loop=4 {
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
