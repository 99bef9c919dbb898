# Attention whose S tile each warp holds whole rows of, so lowering keeps S, P, the row max and sum, P·V and the
# accumulators in registers (pass keep_rows_in_registers), with 40 query rows: not a multiple of the matrix
# instruction's 16, three row blocks over two warps, the last one ragged.
kernel flash_ragged_rows(Q: f16[2,40,32], K: f16[2,32,128], V: f16[2,128,32]) {
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
