# Matmul operands the copy engine writes in column blocks (mg::Blocked): W1's 192-byte rows as three blocks of 32
# columns (the engine's 64-byte swizzle), W2's 96-byte rows as three blocks of 16 (32-byte swizzle), 128 rows per
# stage, four stages.
kernel engine_column_blocks(X: f16[32,512], W1: f16[512,96], W2: f16[512,48]) {
  Y1, Y2 = block(X, W1, W2) grid=[2,1,1] threads=128 loop=4 {
    x = iter(X, imap=[0,-,-], fmap=1)
    w1 = iter(W1, imap=[-,-,-], fmap=0)
    w2 = iter(W2, imap=[-,-,-], fmap=0)
    p1 = matmul(x, w1)
    p2 = matmul(x, w2)
    a1 = acc_sum(p1)
    a2 = acc_sum(p2)
    save(a1, omap=[0,-,-])
    save(a2, omap=[0,-,-])
  }
  return Y1, Y2
}
