# Seed: RMSNorm+Linear fused in one block op with two accumulators and an epilogue; a second program for a target.
kernel small_rmsnorm_linear(X: f16[2,64], W: f16[64,32]) {
  Y = block(X, W) grid=[2,1,1] threads=64 loop=2 {
    x = iter(X, imap=[-,-,-], fmap=1)
    w = iter(W, imap=[1,-,-], fmap=0)
    p = matmul(x, w)
    q = square(x)
    r = reduce_sum(q, dim=1)
    a = acc_sum(p)
    s = acc_sum(r)
    m = mul_scalar(s, s=0.015625)
    e = add_scalar(m, s=1e-06)
    n = rsqrt(e)
    y = mul(a, n)
    save(y, omap=[1,-,-])
  }
  return Y
}
kernel small_rmsnorm_linear(X: f16[2,64], W: f16[64,32]) for [h100, a100] {
  N = rms_norm(X, dim=1)
  Y = matmul(N, W)
  return Y
}
