# Matmul operand tiles whose rows are six 16-byte chunks (48 f16 columns: neither a power of two nor odd): both the
# A tile (X, 48 columns of K per iteration) and the B tile (W, 48 columns of N per block) are swizzled with a span of
# gcd(6, 8) = 2 chunks, so ldmatrix reads 8 rows from 8 distinct bank groups; M = 20 is ragged against the atom.
kernel swizzle_six_chunks(X: f16[20,480], W: f16[480,96]) {
  Y = block(X, W) grid=[2,1,1] threads=128 loop=10 {
    x = iter(X, imap=[-,-], fmap=1)
    w = iter(W, imap=[1,-], fmap=0)
    p = matmul(x, w)
    a = acc_sum(p)
    save(a, omap=[1,-])
  }
  return Y
}
