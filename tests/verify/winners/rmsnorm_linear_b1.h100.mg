# best μGraph found by morgana 0.1.0 optimize; estimated 22.28 us on h100
kernel rmsnorm_linear_b1(X: f16[2,4096], W: f16[4096,6144]) for [h100] {
  Y = block(X, W) grid=[96,1,1] threads=128 loop=32 {
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
  return Y
}
