# Hand variant (session 10): attention_decode with the P·V kernel at grid [64,2] loop 8; 55.9 us on the H100 against the searched pick's 63.0 (bench/results/2026-11-26-h100-80gb-hbm3-d08f881.md). Time it with: python3 -m bench prepare ... --variants attention_decode=bench/variants/attention_decode_pv_64x2.mg
kernel attention_decode(Q: f16[64,1,128], K: f16[64,128,4096], V: f16[64,4096,128]) {
  t3 = matmul(Q, K)
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
