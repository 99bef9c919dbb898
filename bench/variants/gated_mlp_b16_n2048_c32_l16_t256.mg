# gated_mlp_b16_n2048 as one kernel: 64 blocks of 32 columns, the whole K=4096 in a loop of 16, 256 threads (session 16)
kernel gated_mlp_b16_n2048(X: f16[16,4096], W1: f16[4096,2048], W2: f16[4096,2048]) {
  t3 = block(X, W1, W2) grid=[64,1,1] threads=256 loop=16 {
    t0 = iter(X, imap=[-,-,-], fmap=1)
    t1 = iter(W1, imap=[1,-,-], fmap=0)
    t2 = iter(W2, imap=[1,-,-], fmap=0)
    t3 = matmul(t0, t1)
    t4 = matmul(t0, t2)
    t5 = acc_sum(t3)
    t6 = acc_sum(t4)
    t7 = silu(t5)
    t8 = mul(t6, t7)
    save(t8, omap=[1,-,-])
  }
  return t3
}
