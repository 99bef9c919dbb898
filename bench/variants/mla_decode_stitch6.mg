# The six-kernel partial-fusion stitch the search answered before session 29 (windows of at most 3 ops).
kernel mla_decode(Q: f16[16,1,128], Wuk: f16[16,128,512], C: f16[4096,512], Wuv: f16[16,512,128]) for [h100] {
  Ct = transpose(C)
  t5 = block(Q, Wuk) grid=[16,4,1] threads=128 loop=4 {
    t0 = iter(Q, imap=[0,-,-], fmap=2)
    t1 = iter(Wuk, imap=[0,2,-], fmap=1)
    t2 = matmul(t0, t1)
    t3 = acc_sum(t2)
    save(t3, omap=[0,2,-])
  }
  t6 = block(t5, Ct) grid=[2,64,1] threads=128 loop=8 {
    t0 = iter(t5, imap=[0,-,-], fmap=2)
    t1 = iter(Ct, imap=[-,1,-], fmap=0)
    t2 = matmul(t0, t1)
    t3 = acc_sum(t2)
    save(t3, omap=[0,2,-])
  }
  t7 = block(t6) grid=[16,1,1] threads=128 loop=1 {
    t0 = iter(t6, imap=[0,-,-])
    t1 = mul_scalar(t0, s=0.0721688)
    t2 = reduce_max(t1, dim=2)
    t3 = sub(t1, t2)
    t4 = exp(t3)
    t5 = reduce_sum(t4, dim=2)
    t6 = div(t4, t5)
    t7 = acc_sum(t6)
    save(t7, omap=[0,-,-])
  }
  t8 = block(t7, C) grid=[2,8,8] threads=128 loop=8 {
    t0 = iter(t7, imap=[0,2,-], fmap=2)
    t1 = iter(C, imap=[-,0,1], fmap=0)
    t2 = matmul(t0, t1)
    t3 = acc_sum(t2)
    save(t3, omap=[0,1,2])
  }
  t9 = block(t8) grid=[8,1,1] threads=128 loop=8 {
    t0 = iter(t8, imap=[0,-,-], fmap=1)
    t1 = acc_sum(t0)
    save(t1, omap=[0,-,-])
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
