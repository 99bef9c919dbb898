# mla_h32 (bench/notes-mla.md, session 29): the searched Q·W_uk and ·W_uv around the attention core window's own
# best (split-KV core and combine), the four-kernel form the model ranks below the six-kernel stitch at this shape.
kernel mla_h32_k8192(Q: f16[32,1,128], Wuk: f16[32,128,512], C: f16[8192,512], Wuv: f16[32,512,128]) {
  Ct = transpose(C)
  t5 = block(Q, Wuk) grid=[8,8,1] threads=128 loop=1 {
    t0 = iter(Q, imap=[0,-,-])
    t1 = iter(Wuk, imap=[0,2,-])
    t2 = matmul(t0, t1)
    t3 = acc_sum(t2)
    save(t3, omap=[0,2,-])
  }
  s, l, m = block(t5, C, Ct) grid=[4,32,1] threads=128 loop=4 {
    t0 = iter(t5, imap=[0,-,-])
    t1 = iter(C, imap=[-,0,-], fmap=0)
    t2 = iter(Ct, imap=[-,1,-], fmap=1)
    t3 = matmul(t0, t2)
    t4 = mul_scalar(t3, s=0.0721688)
    t5 = reduce_max(t4, dim=2)
    t6 = sub(t4, t5)
    t7 = exp(t6)
    t8 = reduce_sum(t7, dim=2)
    t9 = matmul(t7, t1)
    t10 = acc_rescale_sum(t8, t5)
    t11 = acc_rescale_sum(t9, t5)
    t12 = acc_max(t5)
    save(t10, omap=[0,1,-])
    save(t11, omap=[0,1,-])
    save(t12, omap=[0,1,-])
  }
  L = block(s, l, m) grid=[32,1,1] threads=128 loop=32 {
    t0 = iter(s, imap=[0,-,-], fmap=1)
    t1 = iter(l, imap=[0,-,-], fmap=1)
    t2 = iter(m, imap=[0,-,-], fmap=1)
    t3 = acc_rescale_sum(t0, t2)
    t4 = acc_rescale_sum(t1, t2)
    t5 = div(t4, t3)
    save(t5, omap=[0,-,-])
  }
  O = block(L, Wuv) grid=[32,2,1] threads=128 loop=8 {
    t0 = iter(L, imap=[0,-,-], fmap=2)
    t1 = iter(Wuv, imap=[0,2,-], fmap=1)
    t2 = matmul(t0, t1)
    t3 = acc_sum(t2)
    save(t3, omap=[0,2,-])
  }
  return O
}
