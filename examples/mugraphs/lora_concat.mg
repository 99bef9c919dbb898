# spec: examples/lora.mg
# XW + (XA)B as a concat-then-matmul. The first block op computes XA (for-loop over
# K = 256 in 4 steps of 64); the second tiles the 4096 output columns (32 x 128) and multiplies
# concat(X, XA) [16,272] by concat(W, B) [272,128]: (X | XA) (W ; B) = XW + (XA)B.
kernel lora_concat(X: f16[16,256], W: f16[256,4096], A: f16[256,16], B: f16[16,4096]) {
  XA = block(X, A) grid=[1,1,1] threads=128 loop=4 {
    x = iter(X, imap=[-,-,-], fmap=1)
    a = iter(A, imap=[-,-,-], fmap=0)
    p = matmul(x, a)
    s = acc_sum(p)
    save(s, omap=[-,-,-])
  }
  Y = block(X, XA, W, B) grid=[32,1,1] threads=128 loop=1 {
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
