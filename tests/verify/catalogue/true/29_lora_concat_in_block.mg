# LoRA XW + (XA)B in concat form within one block op, as the search generates it: each block computes XA for its
# rows and multiplies (XA | X) by (B ; W) over the joined R+K axis (the concat's order on both sides matches, so
# the stretches of the sum pair up: XA with B, X with W).
kernel ref(X: f16[16,32], W: f16[32,64], A: f16[32,8], B: f16[8,64]) {
  XW = matmul(X, W)
  XA = matmul(X, A)
  XAB = matmul(XA, B)
  Y = add(XW, XAB)
  return Y
}

kernel cand(X: f16[16,32], W: f16[32,64], A: f16[32,8], B: f16[8,64]) {
  Y = block(X, W, A, B) grid=[2,4,1] threads=128 loop=1 {
    x = iter(X, imap=[0,-,-])
    w = iter(W, imap=[-,1,-])
    a = iter(A, imap=[-,-,-])
    b = iter(B, imap=[-,1,-])
    xa = matmul(x, a)
    r = concat(b, w, dim=0)
    l = concat(xa, x, dim=1)
    p = matmul(l, r)
    s = acc_sum(p)
    save(s, omap=[0,1,-])
  }
  return Y
}
