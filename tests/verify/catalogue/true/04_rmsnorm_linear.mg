# RMSNorm with a weight vector g followed by a linear layer, fused as (x*g W) / rms(x): grid x tiles the 16 columns,
# the for-loop walks K = 32 in 4 steps accumulating (x*g) W and the row sums of x^2; the epilogue divides by
# sqrt(sum/32 + eps).
kernel ref(X: f16[4,32], G: f16[32], W: f16[32,16]) {
  N = rms_norm(X, dim=1)
  NG = mul(N, G)
  Y = matmul(NG, W)
  return Y
}

kernel cand(X: f16[4,32], G: f16[32], W: f16[32,16]) {
  Y = block(X, G, W) grid=[2,1,1] threads=128 loop=4 {
    x = iter(X, imap=[-,-,-], fmap=1)
    g = iter(G, imap=[-,-,-], fmap=0)
    w = iter(W, imap=[1,-,-], fmap=0)
    xg = mul(x, g)
    p = matmul(xg, w)
    q = square(x)
    r = reduce_sum(q, dim=1)
    a = acc_sum(p)
    s = acc_sum(r)
    m = mul_scalar(s, s=0.03125)
    e = add_scalar(m, s=1e-06)
    n = sqrt(e)
    y = div(a, n)
    save(y, omap=[1,-,-])
  }
  return Y
}
