# spec: examples/gated_mlp.mg
# Both matmuls in one block op. Grid x tiles the 4096 output columns (64 x 64);
# the for-loop walks K in 16 steps of 256 accumulating X W1 and X W2; the epilogue applies silu and the product.
kernel gated_mlp_fused(X: f16[8,4096], W1: f16[4096,4096], W2: f16[4096,4096]) {
  Y = block(X, W1, W2) grid=[64,1,1] threads=128 loop=16 {
    x = iter(X, imap=[-,-,-], fmap=1)
    w1 = iter(W1, imap=[1,-,-], fmap=0)
    w2 = iter(W2, imap=[1,-,-], fmap=0)
    p1 = matmul(x, w1)
    p2 = matmul(x, w2)
    a1 = acc_sum(p1)
    a2 = acc_sum(p2)
    g = silu(a1)
    y = mul(g, a2)
    save(y, omap=[1,-,-])
  }
  return Y
}
