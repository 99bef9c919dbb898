# 16 KV splits of 128 keys (4 iterations of 32): 256 flash blocks, two per SM
kernel gqa_h8_d128_k2048_scaled(Q: f16[8,128,128], K: f16[8,128,2048], V: f16[8,2048,128]) {
  t3, t4, t5 = block(Q, K, V) grid=[8,2,16] threads=128 loop=4 {
    t0 = iter(Q, imap=[0,1,-])
    t1 = iter(K, imap=[0,-,2], fmap=2)
    t2 = iter(V, imap=[0,-,1], fmap=1)
    t3 = matmul(t0, t1)
    t4 = mul_scalar(t3, s=0.08838834764831845)
    t5 = reduce_max(t4, dim=2)
    t6 = sub(t4, t5)
    t7 = exp(t6)
    t8 = reduce_sum(t7, dim=2)
    t9 = matmul(t7, t2)
    t10 = acc_rescale_sum(t8, t5)
    t11 = acc_rescale_sum(t9, t5)
    t12 = acc_max(t5)
    save(t10, omap=[0,1,2])
    save(t11, omap=[0,1,2])
    save(t12, omap=[0,1,2])
  }
  t6 = block(t3, t4, t5) grid=[8,128,1] threads=128 loop=16 {
    t0 = iter(t3, imap=[0,1,-], fmap=2)
    t1 = iter(t4, imap=[0,1,-], fmap=2)
    t2 = iter(t5, imap=[0,1,-], fmap=2)
    t3 = acc_rescale_sum(t0, t2)
    t4 = acc_rescale_sum(t1, t2)
    t5 = div(t4, t3)
    save(t5, omap=[0,1,-])
  }
  return t6
}
