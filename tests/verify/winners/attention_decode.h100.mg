# best μGraph found by morgana 0.1.0 optimize; estimated 58.48 us on h100
kernel attention_decode(Q: f16[64,1,128], K: f16[64,128,4096], V: f16[64,4096,128]) for [h100] {
  t3, t4, t5 = block(Q, K, V) grid=[64,2,1] threads=128 loop=16 {
    t0 = iter(Q, imap=[0,-,-])
    t1 = iter(K, imap=[0,2,-], fmap=2)
    t2 = iter(V, imap=[0,1,-], fmap=1)
    t3 = matmul(t0, t1)
    t4 = reduce_max(t3, dim=2)
    t5 = sub(t3, t4)
    t6 = exp(t5)
    t7 = reduce_sum(t6, dim=2)
    t8 = matmul(t6, t2)
    t9 = acc_rescale_sum(t7, t4)
    t10 = acc_rescale_sum(t8, t4)
    t11 = acc_max(t4)
    save(t9, omap=[0,1,-])
    save(t10, omap=[0,1,-])
    save(t11, omap=[0,1,-])
  }
  O = block(t3, t4, t5) grid=[64,1,1] threads=128 loop=2 {
    t0 = iter(t3, imap=[0,-,-], fmap=1)
    t1 = iter(t4, imap=[0,-,-], fmap=1)
    t2 = iter(t5, imap=[0,-,-], fmap=1)
    t3 = acc_rescale_sum(t0, t2)
    t4 = acc_rescale_sum(t1, t2)
    t5 = div(t4, t3)
    save(t5, omap=[0,-,-])
  }
  return O
}
