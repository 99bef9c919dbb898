# best μGraph found by morgana 0.1.0 optimize; estimated 21.77 us on h100
kernel mla_decode(Q: f16[16,1,128], Wuk: f16[16,128,512], C: f16[4096,512], Wuv: f16[16,512,128]) for [h100] {
  Ct = transpose(C)
  t5 = block(Q, Wuk) grid=[16,4,1] threads=128 loop=4 {
    t0 = iter(Q, imap=[0,-,-], fmap=2)
    t1 = iter(Wuk, imap=[0,2,-], fmap=1)
    t2 = matmul(t0, t1)
    t3 = acc_sum(t2)
    save(t3, omap=[0,2,-])
  }
  t6, t7, t8 = block(t5, Ct, C) grid=[2,32,1] threads=128 loop=1 {
    t0 = iter(t5, imap=[0,-,-])
    t1 = iter(Ct, imap=[-,1,-])
    t2 = iter(C, imap=[-,0,-])
    t3 = matmul(t0, t1)
    t4 = mul_scalar(t3, s=0.0721688)
    t5 = reduce_max(t4, dim=2)
    t6 = sub(t4, t5)
    t7 = exp(t6)
    t8 = reduce_sum(t7, dim=2)
    t9 = matmul(t7, t2)
    t10 = acc_rescale_sum(t8, t5)
    t11 = acc_rescale_sum(t9, t5)
    t12 = acc_max(t5)
    save(t10, omap=[0,1,-])
    save(t11, omap=[0,1,-])
    save(t12, omap=[0,1,-])
  }
  t9 = block(t6, t7, t8) grid=[16,1,1] threads=128 loop=32 {
    t0 = iter(t6, imap=[0,-,-], fmap=1)
    t1 = iter(t7, imap=[0,-,-], fmap=1)
    t2 = iter(t8, imap=[0,-,-], fmap=1)
    t3 = acc_rescale_sum(t0, t2)
    t4 = acc_rescale_sum(t1, t2)
    t5 = div(t4, t3)
    save(t5, omap=[0,-,-])
  }
  O = block(t9, Wuv) grid=[16,4,1] threads=128 loop=4 {
    t0 = iter(t9, imap=[0,-,-], fmap=2)
    t1 = iter(Wuv, imap=[0,2,-], fmap=1)
    t2 = matmul(t0, t1)
    t3 = acc_sum(t2)
    save(t3, omap=[0,2,-])
  }
  return O
}
