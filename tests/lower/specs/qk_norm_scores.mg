# QK-norm's scores and their softmax numerators in one block: both matmul operands are rms_norms over its
# contraction dim and the product stays in registers for the row chain after it (keep_rows_in_registers), so Q's row
# factors come from the fragments the matrix instruction is fed (norms_from_fragments); K's stay a reduction.
kernel qk_norm_scores(Q: f16[2,32,64], K: f16[2,64,32]) {
  E = block(Q, K) grid=[2,1,1] threads=64 loop=1 {
    q = iter(Q, imap=[0,-,-])
    k = iter(K, imap=[0,-,-])
    qn = rms_norm(q, dim=2)
    kn = rms_norm(k, dim=1)
    s = matmul(qn, kn)
    m = reduce_max(s, dim=2)
    d = sub(s, m)
    e = exp(d)
    c = acc_sum(e)
    save(c, omap=[0,-,-])
  }
  return E
}
