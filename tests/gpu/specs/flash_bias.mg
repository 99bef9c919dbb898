# Attention with an additive bias tile: a shared-memory operand inside the chain of statements that
# keep_rows_in_registers keeps in registers.
kernel flash_bias(Q: f16[64,32], K: f16[32,128], V: f16[128,32], B: f16[64,128]) {
  O = block(Q, K, V, B) grid=[2,1,1] threads=64 loop=2 {
    q = iter(Q, imap=[0,-])
    k = iter(K, imap=[-,-], fmap=1)
    v = iter(V, imap=[-,-], fmap=0)
    b = iter(B, imap=[0,-], fmap=1)
    s = matmul(q, k)
    t = add(s, b)
    m = reduce_max(t, dim=1)
    d = sub(t, m)
    e = exp(d)
    l = reduce_sum(e, dim=1)
    o = matmul(e, v)
    L = acc_rescale_sum(l, m)
    A = acc_rescale_sum(o, m)
    y = div(A, L)
    save(y, omap=[0,-])
  }
  return O
}
