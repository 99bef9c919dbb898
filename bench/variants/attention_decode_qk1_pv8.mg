# Hand variant (session 13): attention_decode as the searched Q·K in one iteration per block and the P·V at grid [64,2] in 8 iterations of 512 keys; 56.6 us on the H100 against 58.9 for the 16-iteration P·V the cost model picks (bench/notes-fast-kernels-1.md, session 13).
kernel attention_decode(Q: f16[64,1,128], K: f16[64,128,4096], V: f16[64,4096,128]) {
  t3 = block(Q, K) grid=[64,32,1] threads=128 loop=1 {
    t0 = iter(Q, imap=[0,-,-])
    t1 = iter(K, imap=[0,2,-])
    t2 = matmul(t0, t1)
    t3 = acc_sum(t2)
    save(t3, omap=[0,2,-])
  }
  t4 = block(V, t3) grid=[64,2,1] threads=128 loop=8 {
    t0 = iter(V, imap=[0,2,-], fmap=1)
    t1 = iter(t3, imap=[0,-,-], fmap=2)
    t2 = reduce_max(t1, dim=2)
    t3 = sub(t1, t2)
    t4 = exp(t3)
    t5 = reduce_sum(t4, dim=2)
    t6 = matmul(t4, t0)
    t7 = acc_rescale_sum(t5, t2)
    t8 = acc_rescale_sum(t6, t2)
    t9 = div(t8, t7)
    save(t9, omap=[0,2,-])
  }
  return t4
}
