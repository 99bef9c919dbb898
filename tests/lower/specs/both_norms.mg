# QK-norm's scores in one pass: both operands of the matmul are rms_norms over its contraction dim, left to the
# product (ir::norm_scaled_after), so the product is scaled by Q's row factors and by K's column factors.
kernel both_norms(Q: f16[2,16,32], K: f16[2,32,16]) {
  S = block(Q, K) grid=[2,1,1] threads=64 loop=1 {
    q = iter(Q, imap=[0,-,-])
    k = iter(K, imap=[0,-,-])
    qn = rms_norm(q, dim=2)
    kn = rms_norm(k, dim=1)
    s = matmul(qn, kn)
    c = acc_sum(s)
    save(c, omap=[0,-,-])
  }
  return S
}
