# Hand variant (session 10): rmsnorm_linear_b8 as an rms_norm kernel, then a 192-block matmul kernel at loop 32; 25.5 us on the H100 against the searched pick's 27.5 (bench/results/2026-11-26-h100-80gb-hbm3-d08f881.md).
kernel rmsnorm_linear_b8(X: f16[16,4096], W: f16[4096,6144]) {
  t2 = block(X) grid=[16,1,1] threads=128 loop=1 {
    t0 = iter(X, imap=[0,-,-])
    t1 = rms_norm(t0, dim=1)
    t2 = acc_sum(t1)
    save(t2, omap=[0,-,-])
  }
  t3 = block(W, t2) grid=[192,1,1] threads=128 loop=32 {
    t0 = iter(W, imap=[1,-,-], fmap=0)
    t1 = iter(t2, imap=[-,-,-], fmap=1)
    t2 = matmul(t1, t0)
    t3 = acc_sum(t2)
    save(t3, omap=[1,-,-])
  }
  return t3
}
