# best μGraph found by morgana 0.1.0 optimize; estimated 2.99 us on h100
kernel ntrans(H: f16[8,4096], X: f16[8,4096], alpha: f16[8,4096]) for [h100] {
  Y = block(H, X, alpha) grid=[8,1,1] threads=128 loop=1 {
    t0 = iter(H, imap=[0,-,-])
    t1 = iter(X, imap=[0,-,-])
    t2 = iter(alpha, imap=[0,-,-])
    t3 = rms_norm(t0, dim=1)
    t4 = sub(t3, t1)
    t5 = mul(t2, t4)
    t6 = add(t1, t5)
    t7 = rms_norm(t6, dim=1)
    t8 = acc_sum(t7)
    save(t8, omap=[0,-,-])
  }
  return Y
}
