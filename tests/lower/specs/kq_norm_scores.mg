# qk_norm_scores.mg with K normalised first: the product is scaled by K's column factors before Q's row factors, and
# Q's move into the matmul (norms_from_fragments) from second place in that chain.
kernel kq_norm_scores(Q: f16[2,32,64], K: f16[2,64,32]) {
  E = block(Q, K) grid=[2,1,1] threads=64 loop=1 {
    q = iter(Q, imap=[0,-,-])
    k = iter(K, imap=[0,-,-])
    kn = rms_norm(k, dim=1)
    qn = rms_norm(q, dim=2)
    s = matmul(qn, kn)
    m = reduce_max(s, dim=2)
    d = sub(s, m)
    e = exp(d)
    c = acc_sum(e)
    save(c, omap=[0,-,-])
  }
  return E
}
