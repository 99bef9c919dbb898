# spec: examples/qknorm_b1.mg
# Split-KV flash attention with both norms fused. Block op: grid x over 8 tiles of 32 query rows (both heads),
# grid y over 16 KV splits of 256 keys, for-loop over 4 chunks of 64 keys: Q's rms_norm once, each K chunk's
# rms_norm over its head dim, Q·K, online softmax, P·V. The second block op combines the 16 splits: its running
# sums and maxima are rows of one f16, loaded for all 16 iterations before its loop (docs/lowering.md).
kernel qknorm_b1_flash(Q: f16[2,256,64], K: f16[2,64,4096], V: f16[2,4096,64]) {
  Ls, Os, Ms = block(Q, K, V) grid=[8,16,1] threads=128 loop=4 {
    q = iter(Q, imap=[1,-,-])
    k = iter(K, imap=[-,2,-], fmap=2)
    v = iter(V, imap=[-,1,-], fmap=1)
    qn = rms_norm(q, dim=2)
    kn = rms_norm(k, dim=1)
    s = matmul(qn, kn)
    m = reduce_max(s, dim=2)
    d = sub(s, m)
    e = exp(d)
    l = reduce_sum(e, dim=2)
    o = matmul(e, v)
    Lacc = acc_rescale_sum(l, m)
    Oacc = acc_rescale_sum(o, m)
    M = acc_max(m)
    save(Lacc, omap=[1,0,-])
    save(Oacc, omap=[1,0,-])
    save(M, omap=[1,0,-])
  }
  O = block(Ls, Os, Ms) grid=[256,2,1] threads=128 loop=16 {
    l = iter(Ls, imap=[1,-,-], fmap=0)
    o = iter(Os, imap=[1,2,-], fmap=0)
    m = iter(Ms, imap=[1,-,-], fmap=0)
    L = acc_rescale_sum(l, m)
    A = acc_rescale_sum(o, m)
    y = div(A, L)
    save(y, omap=[1,2,-])
  }
  return O
}
