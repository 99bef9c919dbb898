# X·Wᵀ with the weight's tiles loaded as they lie and read as Bᵀ on the matrix instruction.
kernel linear_t(X: f16[16,256], W: f16[512,256]) {
  Wt = transpose(W)
  Y = block(X, Wt) grid=[8,1,1] threads=128 loop=4 {
    x = iter(X, imap=[-,-,-], fmap=1)
    w = iter(Wt, imap=[1,-,-], fmap=0)
    p = matmul(x, w)
    a = acc_sum(p)
    save(a, omap=[1,-,-])
  }
  return Y
}
