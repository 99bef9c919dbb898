# nTrans (examples/ntrans.mg) as one kernel: a block per row holds H, X and alpha's row, both norms and the update.
# With 512 threads each thread keeps its eight elements of every tile in registers (the lowering's element
# layout): the loads, the update and the store need no shared memory, the two row norms one value per warp.
kernel ntrans_fused(H: f16[8,4096], X: f16[8,4096], alpha: f16[8,4096]) {
  Y = block(H, X, alpha) grid=[8,1,1] threads=512 loop=1 {
    h = iter(H, imap=[0,-,-])
    x = iter(X, imap=[0,-,-])
    a = iter(alpha, imap=[0,-,-])
    hn = rms_norm(h, dim=1)
    d = sub(hn, x)
    ad = mul(a, d)
    z = add(x, ad)
    y = rms_norm(z, dim=1)
    out = acc_sum(y)
    save(out, omap=[0,-,-])
  }
  return Y
}
