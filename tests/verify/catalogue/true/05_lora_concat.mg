# LoRA XW + (XA)B in concat form (X | XA)(W ; B): the first block op computes XA, the second multiplies the
# concatenations tile by tile (grid x over 4 column tiles of 8).
kernel ref(X: f16[4,16], W: f16[16,32], A: f16[16,4], B: f16[4,32]) {
  XW = matmul(X, W)
  XA = matmul(X, A)
  XAB = matmul(XA, B)
  Y = add(XW, XAB)
  return Y
}

kernel cand(X: f16[4,16], W: f16[16,32], A: f16[16,4], B: f16[4,32]) {
  XA = block(X, A) grid=[1,1,1] threads=128 loop=2 {
    x = iter(X, imap=[-,-,-], fmap=1)
    a = iter(A, imap=[-,-,-], fmap=0)
    p = matmul(x, a)
    s = acc_sum(p)
    save(s, omap=[-,-,-])
  }
  Y = block(X, XA, W, B) grid=[4,1,1] threads=128 loop=1 {
    x = iter(X, imap=[-,-,-])
    t = iter(XA, imap=[-,-,-])
    w = iter(W, imap=[1,-,-])
    b = iter(B, imap=[1,-,-])
    l = concat(x, t, dim=1)
    r = concat(w, b, dim=0)
    p = matmul(l, r)
    s = acc_sum(p)
    save(s, omap=[1,-,-])
  }
  return Y
}
