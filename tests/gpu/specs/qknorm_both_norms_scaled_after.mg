# QK-norm attention as the search picked it for an unseen shape (bench/unseen/qknorm_h8_d128_k1024.mg): the scores
# kernel normalizes Q's rows and K's columns after the matmul, both factors on one product (the H100 bench
# caught one of them lost: 2.4e-2 relative error).
kernel qknorm_h8_d128_k1024(Q: f16[8,64,128], K: f16[8,128,1024], V: f16[8,1024,128]) for [h100, h200] {
  t3 = block(Q, K) grid=[8,16,1] threads=128 loop=1 {
    t0 = iter(Q, imap=[0,-,-])
    t1 = iter(K, imap=[0,2,-])
    t2 = rms_norm(t0, dim=2)
    t3 = rms_norm(t1, dim=1)
    t4 = matmul(t2, t3)
    t5 = acc_sum(t4)
    save(t5, omap=[0,2,-])
  }
  O = block(V, t3) grid=[8,8,2] threads=128 loop=1 {
    t0 = iter(V, imap=[0,-,2])
    t1 = iter(t3, imap=[0,1,-])
    t2 = reduce_max(t1, dim=2)
    t3 = sub(t1, t2)
    t4 = exp(t3)
    t5 = reduce_sum(t4, dim=2)
    t6 = matmul(t4, t0)
    t7 = div(t6, t5)
    t8 = acc_sum(t7)
    save(t8, omap=[0,1,2])
  }
  return O
}
