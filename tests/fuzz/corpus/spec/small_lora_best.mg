# best μGraph found by morgana 0.1.0 optimize; estimated 3.19 us on h100
kernel small_lora(X: f16[16,64], W: f16[64,128], A: f16[64,16], B: f16[16,128]) for [h100] {
  Y = block(X, W, A, B) grid=[16,16,1] threads=128 loop=1 {
    t0 = iter(X, imap=[0,-,-])
    t1 = iter(W, imap=[-,1,-])
    t2 = iter(A, imap=[-,-,-])
    t3 = iter(B, imap=[-,1,-])
    t4 = matmul(t0, t1)
    t5 = matmul(t0, t2)
    t6 = matmul(t5, t3)
    t7 = add(t4, t6)
    t8 = acc_sum(t7)
    save(t8, omap=[0,1,-])
  }
  return Y
}
