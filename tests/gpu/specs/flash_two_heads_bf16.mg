# Attention with S, P and the accumulators in registers (pass keep_rows_in_registers), two heads per block (warp
# tasks of two batches), in bf16.
kernel flash_two_heads_bf16(Q: bf16[4,32,16], K: bf16[4,16,64], V: bf16[4,64,16]) {
  O = block(Q, K, V) grid=[2,1,1] threads=64 loop=2 {
    q = iter(Q, imap=[0,-,-])
    k = iter(K, imap=[0,-,-], fmap=2)
    v = iter(V, imap=[0,-,-], fmap=1)
    s = matmul(q, k)
    m = reduce_max(s, dim=2)
    d = sub(s, m)
    e = exp(d)
    l = reduce_sum(e, dim=2)
    o = matmul(e, v)
    L = acc_rescale_sum(l, m)
    A = acc_rescale_sum(o, m)
    y = div(A, L)
    save(y, omap=[0,-,-])
  }
  return O
}
