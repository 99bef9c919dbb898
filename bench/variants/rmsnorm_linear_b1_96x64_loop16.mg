# rmsnorm_linear_b1 as 96 blocks of 64 columns, loop 16: the fastest of the top 20 timed on the H100 (23.1 us,
# bench/results/2026-11-26-h100-top20-timed.json, rank 18 of the search at d08f881)
kernel rmsnorm_linear_b1(X: f16[2,4096], W: f16[4096,6144]) {
  t2 = block(X, W) grid=[96,1,1] threads=128 loop=16 {
    t0 = iter(X, imap=[-,-,-], fmap=1)
    t1 = iter(W, imap=[1,-,-], fmap=0)
    t2 = square(t0)
    t3 = matmul(t0, t1)
    t4 = reduce_sum(t2, dim=1)
    t5 = acc_sum(t3)
    t6 = acc_sum(t4)
    t7 = mul_scalar(t6, s=0.000244140625)
    t8 = add_scalar(t7, s=1e-06)
    t9 = rsqrt(t8)
    t10 = mul(t5, t9)
    save(t10, omap=[1,-,-])
  }
  return t2
}
