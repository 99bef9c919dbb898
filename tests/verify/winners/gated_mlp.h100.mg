# best μGraph found by morgana 0.1.0 optimize; estimated 29.75 us on h100
kernel gated_mlp(X: f16[8,4096], W1: f16[4096,4096], W2: f16[4096,4096]) for [h100] {
  Y = block(X, W1, W2) grid=[64,1,1] threads=128 loop=32 {
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
  return Y
}
