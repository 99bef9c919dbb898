# X·Wᵀ computed as (W·Xᵀ)ᵀ: both transposes are views, the block reads Xᵀ through its swapped strides.
kernel ref(X: f16[2,16,8], W: f16[24,8]) {
  Wt = transpose(W)
  Y = matmul(X, Wt)
  return Y
}

kernel cand(X: f16[2,16,8], W: f16[24,8]) {
  Xt = transpose(X)
  Z = block(W, Xt) grid=[2,2,1] threads=32 loop=2 {
    w = iter(W, imap=[-,0,-], fmap=1)
    x = iter(Xt, imap=[0,-,-], fmap=1)
    p = matmul(w, x)
    a = acc_sum(p)
    save(a, omap=[0,1,-])
  }
  Y = transpose(Z)
  return Y
}
