# A fused RMSNorm-and-matmul block at small shapes: the sum of squares and the row max of X fold across the loop in
# registers (lowering pass fold_across_loop) while reading the tile the matmul takes as A, which is swizzled (16
# rows of 128 bytes): whole-row reductions read it as it is.
kernel loop_folds_swizzled(X: f16[32,320], W: f16[320,16]) {
  Y, M = block(X, W) grid=[2,1,1] threads=64 loop=5 {
    x = iter(X, imap=[0,-,-], fmap=1)
    w = iter(W, imap=[-,-,-], fmap=0)
    p = matmul(x, w)
    q = square(x)
    r = reduce_sum(q, dim=1)
    m = reduce_max(x, dim=1)
    a = acc_sum(p)
    s = acc_sum(r)
    n = acc_max(m)
    e = mul_scalar(s, s=0.003125)
    f = add_scalar(e, s=1e-06)
    g = rsqrt(f)
    y = mul(a, g)
    save(y, omap=[0,-,-])
    save(n, omap=[0,-,-])
  }
  return Y, M
}
