# LoRA in concat form as the search generates it (issue 14 item 6): one kernel, each block computes XA for its rows
# and multiplies (XA‖X) by (B;W) over the joined R‖K axis: one product instead of two, a concat of a computed tile
# with a loaded one.
kernel lora_concat_fused(X: f16[16,256], W: f16[256,4096], A: f16[256,16], B: f16[16,4096]) {
  Y = block(X, W, A, B) grid=[2,64,1] threads=128 loop=1 {
    t0 = iter(X, imap=[0,-,-])
    t1 = iter(W, imap=[-,1,-])
    t2 = iter(A, imap=[-,-,-])
    t3 = iter(B, imap=[-,1,-])
    t4 = matmul(t0, t2)
    t5 = concat(t3, t1, dim=0)
    t6 = concat(t4, t0, dim=1)
    t7 = matmul(t6, t5)
    t8 = acc_sum(t7)
    save(t8, omap=[0,1,-])
  }
  return Y
}
