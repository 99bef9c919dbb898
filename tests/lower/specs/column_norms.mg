# Norms over a matmul operand's contraction dim, left to the product (ir::norm_scaled_after), and folds over a tile's
# rows by 16-byte chunks (mg::fold_rows_by_chunks): K's column norms scale the product's columns (two heads per
# block, K swizzled as the matmul's B), X's row norms scale the product's rows, and Z's columns are summed over 20
# rows, which its lanes share unevenly; U's 20 rows of 128 bytes fold 4 at a time per warp (mg::fold_short_rows),
# the last round half empty.
kernel column_norms(Q: f16[2,16,32], K: f16[2,32,128], X: f16[2,64,64], W: f16[2,64,16], Z: f16[4,20,48], U: f16[2,20,64]) {
  S = block(Q, K) grid=[1,1,1] threads=64 loop=2 {
    q = iter(Q, imap=[-,-,-])
    k = iter(K, imap=[-,-,-], fmap=2)
    kn = rms_norm(k, dim=1)
    s = matmul(q, kn)
    t = mul_scalar(s, s=0.25)
    e = exp(t)
    a = acc_max(e)
    save(a, omap=[-,-,-])
  }
  P = block(X, W) grid=[2,1,1] threads=64 loop=2 {
    x = iter(X, imap=[0,-,-], fmap=1)
    w = iter(W, imap=[0,-,-])
    xn = rms_norm(x, dim=2)
    p = matmul(xn, w)
    m = acc_max(p)
    save(m, omap=[0,-,-])
  }
  R = block(Z) grid=[2,1,1] threads=64 {
    z = iter(Z, imap=[0,-,-])
    r = reduce_sum(z, dim=1)
    c = acc_sum(r)
    save(c, omap=[0,-,-])
  }
  M = block(U, W) grid=[2,1,1] threads=64 {
    u = iter(U, imap=[0,-,-])
    w = iter(W, imap=[0,-,-])
    un = rms_norm(u, dim=2)
    p = matmul(un, w)
    c = acc_sum(p)
    save(c, omap=[0,-,-])
  }
  return S, P, R, M
}
