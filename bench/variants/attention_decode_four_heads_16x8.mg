# The split-KV form the search picked for attention_decode before session 15's chain_shown_at (four heads per block,
# 8 splits of 512 keys in 16 iterations; combine of 8): 56.54 us on the H100 against 52.70 for
# attention_decode_head_per_block_64x2.mg (bench/notes-fast-kernels-1.md, session 15).
kernel attention_decode(Q: f16[64,1,128], K: f16[64,128,4096], V: f16[64,4096,128]) {
  t3, t4, t5 = block(Q, K, V) grid=[16,8,1] threads=128 loop=16 {
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
  t6 = block(t3, t4, t5) grid=[64,2,1] threads=128 loop=8 {
    t0 = iter(t3, imap=[0,-,-], fmap=1)
    t1 = iter(t4, imap=[0,2,-], fmap=1)
    t2 = iter(t5, imap=[0,-,-], fmap=1)
    t3 = acc_rescale_sum(t0, t2)
    t4 = acc_rescale_sum(t1, t2)
    t5 = div(t4, t3)
    save(t5, omap=[0,2,-])
  }
  return t6
}
