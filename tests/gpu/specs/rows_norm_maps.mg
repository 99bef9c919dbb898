# Row norms of a product held in registers: square folds into the sum as its pre map and sqrt into its write as a
# post map (fuse_elementwise), and the reduction runs on the register tile (mg::regs_reduce_sum with both maps).
kernel rows_norm_maps(Q: f16[64,32], K: f16[32,128]) {
  Y = block(Q, K) grid=[2,1,1] threads=64 loop=1 {
    q = iter(Q, imap=[0,-])
    k = iter(K, imap=[-,-])
    s = matmul(q, k)
    p = square(s)
    r = reduce_sum(p, dim=1)
    n = sqrt(r)
    y = div(s, n)
    a = acc_sum(y)
    save(a, omap=[0,-])
  }
  return Y
}
