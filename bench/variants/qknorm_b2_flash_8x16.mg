# Hand-written for the bench (session 15): qknorm_b1's flash + split-KV form at qknorm_b2_k2048's shape, 8 row blocks x 16 key splits of 2 iterations.
kernel qknorm_b2_k2048(Q: f16[4,128,64], K: f16[4,64,2048], V: f16[4,2048,64]) {
  t3, t4, t5 = block(Q, K, V) grid=[8,16,1] threads=128 loop=2 {
    t0 = iter(Q, imap=[1,-,-])
    t1 = iter(K, imap=[-,2,-], fmap=2)
    t2 = iter(V, imap=[-,1,-], fmap=1)
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
    save(t11, omap=[1,0,-])
    save(t12, omap=[1,0,-])
    save(t13, omap=[1,0,-])
  }
  t6 = block(t3, t4, t5) grid=[128,1,1] threads=128 loop=16 {
    t0 = iter(t3, imap=[1,-,-], fmap=0)
    t1 = iter(t4, imap=[1,-,-], fmap=0)
    t2 = iter(t5, imap=[1,-,-], fmap=0)
    t3 = acc_rescale_sum(t0, t2)
    t4 = acc_rescale_sum(t1, t2)
    t5 = div(t3, t4)
    save(t5, omap=[1,-,-])
  }
  return t6
}
