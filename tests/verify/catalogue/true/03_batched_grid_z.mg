# A batched matmul as one block op: grid z walks the 4 batches, grid x the two halves of the rows.
kernel ref(A: f16[4,4,8], B: f16[4,8,8]) {
  C = matmul(A, B)
  return C
}

kernel cand(A: f16[4,4,8], B: f16[4,8,8]) {
  C = block(A, B) grid=[2,1,4] threads=32 loop=1 {
    a = iter(A, imap=[1,-,0])
    b = iter(B, imap=[-,-,0])
    p = matmul(a, b)
    s = acc_sum(p)
    save(s, omap=[1,-,0])
  }
  return C
}
