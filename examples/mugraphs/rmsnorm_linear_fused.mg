# spec: examples/rmsnorm_linear_b1.mg
# RMSNorm+Linear in one block op. Grid x tiles the 6144 columns of W
# (48 x 128); the for-loop walks K in 16 steps of 256, accumulating X W and the row sums of X^2. The epilogue
# scales the product row-wise: (rms_norm(X) W) = (X W) * rsqrt(sum(X^2)/4096 + 1e-06).
kernel rmsnorm_linear_fused(X: f16[2,4096], W: f16[4096,6144]) {
  Y = block(X, W) grid=[48,1,1] threads=128 loop=16 {
    x = iter(X, imap=[-,-,-], fmap=1)
    w = iter(W, imap=[1,-,-], fmap=0)
    p = matmul(x, w)
    q = square(x)
    r = reduce_sum(q, dim=1)
    a = acc_sum(p)
    s = acc_sum(r)
    m = mul_scalar(s, s=0.000244140625)
    e = add_scalar(m, s=1e-06)
    n = rsqrt(e)
    y = mul(a, n)
    save(y, omap=[1,-,-])
  }
  return Y
}
