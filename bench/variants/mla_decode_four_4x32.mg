# mla_decode in 4 kernels, as mla_decode_four_2x32.mg but for the core's grid: [4,32], 4 heads a block, the cache
# in 32 splits of 128 tokens, 2 iteration(s) of 64; the combine folds the 32 splits (bench/notes-mla.md, session 29).
kernel mla_four_4x32(Q: f16[16,1,128], Wuk: f16[16,128,512], C: f16[4096,512], Wuv: f16[16,512,128]) {
  Ct = transpose(C)
  t5 = block(Q, Wuk) grid=[16,4,1] threads=128 loop=4 {
    t0 = iter(Q, imap=[0,-,-], fmap=2)
    t1 = iter(Wuk, imap=[0,2,-], fmap=1)
    t2 = matmul(t0, t1)
    t3 = acc_sum(t2)
    save(t3, omap=[0,2,-])
  }
  s, l, m = block(t5, Ct, C) grid=[4,32,1] threads=128 loop=2 {
    t0 = iter(t5, imap=[0,-,-])
    t1 = iter(Ct, imap=[-,1,-], fmap=1)
    t2 = iter(C, imap=[-,0,-], fmap=0)
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
  L = block(s, l, m) grid=[16,1,1] threads=128 loop=32 {
    t0 = iter(s, imap=[0,-,-], fmap=1)
    t1 = iter(l, imap=[0,-,-], fmap=1)
    t2 = iter(m, imap=[0,-,-], fmap=1)
    t3 = acc_rescale_sum(t0, t2)
    t4 = acc_rescale_sum(t1, t2)
    t5 = div(t4, t3)
    save(t5, omap=[0,-,-])
  }
  O = block(L, Wuv) grid=[16,4,1] threads=128 loop=4 {
    t0 = iter(L, imap=[0,-,-], fmap=2)
    t1 = iter(Wuv, imap=[0,2,-], fmap=1)
    t2 = matmul(t0, t1)
    t3 = acc_sum(t2)
    save(t3, omap=[0,2,-])
  }
  return O
}
