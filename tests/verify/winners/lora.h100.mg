# best μGraph found by morgana 0.1.0 optimize; estimated 4.07 us on h100
kernel lora(X: f16[16,256], W: f16[256,4096], A: f16[256,16], B: f16[16,4096]) for [h100] {
  Y = block(X, W, A, B) grid=[2,64,1] threads=128 loop=1 {
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
