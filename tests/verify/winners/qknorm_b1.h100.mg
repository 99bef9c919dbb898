# best μGraph found by morgana 0.1.0 optimize; estimated 17.60 us on h100
kernel qknorm_b1(Q: f16[2,256,64], K: f16[2,64,4096], V: f16[2,4096,64]) for [h100] {
  t3, t4, t5 = block(Q, K, V) grid=[2,4,16] threads=128 loop=2 {
    t0 = iter(Q, imap=[0,1,-])
    t1 = iter(K, imap=[0,-,2], fmap=2)
    t2 = iter(V, imap=[0,-,1], fmap=1)
    t3 = rms_norm(t0, dim=2)
    t4 = rms_norm(t1, dim=1)
    t5 = matmul(t3, t4)
    t6 = reduce_max(t5, dim=2)
    t7 = sub(t5, t6)
    t8 = exp(t7)
    t9 = matmul(t8, t2)
    t10 = reduce_sum(t8, dim=2)
    t11 = acc_rescale_sum(t9, t6)
    t12 = acc_rescale_sum(t10, t6)
    t13 = acc_max(t6)
    save(t11, omap=[0,1,2])
    save(t12, omap=[0,1,2])
    save(t13, omap=[0,1,2])
  }
  O = block(t3, t4, t5) grid=[2,256,1] threads=128 loop=16 {
    t0 = iter(t3, imap=[0,1,-], fmap=2)
    t1 = iter(t4, imap=[0,1,-], fmap=2)
    t2 = iter(t5, imap=[0,1,-], fmap=2)
    t3 = acc_rescale_sum(t0, t2)
    t4 = acc_rescale_sum(t1, t2)
    t5 = div(t3, t4)
    save(t5, omap=[0,1,-])
  }
  return O
}
