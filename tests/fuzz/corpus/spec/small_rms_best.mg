# best μGraph found by morgana 0.1.0 optimize; estimated 2.53 us on h100
kernel small_rms(X: f16[2,64], W: f16[64,32]) for [h100] {
  Y = block(X, W) grid=[2,4,1] threads=128 loop=2 {
    t0 = iter(X, imap=[0,-,-], fmap=1)
    t1 = iter(W, imap=[-,1,-], fmap=0)
    t2 = square(t0)
    t3 = matmul(t0, t1)
    t4 = reduce_sum(t2, dim=1)
    t5 = acc_sum(t3)
    t6 = acc_sum(t4)
    t7 = mul_scalar(t6, s=0.015625)
    t8 = add_scalar(t7, s=1e-06)
    t9 = rsqrt(t8)
    t10 = mul(t5, t9)
    save(t10, omap=[0,1,-])
  }
  return Y
}
