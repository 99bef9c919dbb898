# Reductions folded across a for-loop in registers (lowering pass fold_across_loop): a sum of squares by warps
# (groups of 64) and a max by threads (to=8 groups of 8), each accumulated over five K tiles; the fold-and-scale of
# a fused RMSNorm, and its max counterpart.
kernel loop_folds(X: f16[6,320]) {
  S, M = block(X) grid=[2,1,1] threads=64 loop=5 {
    x = iter(X, imap=[0,-,-], fmap=1)
    q = square(x)
    r = reduce_sum(q, dim=1)
    m = reduce_max(x, dim=1, to=8)
    s = acc_sum(r)
    n = acc_max(m)
    y = mul_scalar(s, s=0.5)
    save(y, omap=[0,-,-])
    save(n, omap=[0,-,-])
  }
  return S, M
}
