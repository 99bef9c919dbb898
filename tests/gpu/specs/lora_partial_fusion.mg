# LoRA as the partial-fusion fallback stitches it (search/partial_fusion.h): `morgana optimize examples/lora.mg --target h100
# --max-kernel-ops 1 --max-block-ops 3` finds no complete fused candidate and answers with its windows searched apart:
# XW tiled over K, XA alone, then XA·B added to XW in one kernel. Three graph-defined kernels, one reading the two
# before it.
kernel lora_partial_fusion(X: f16[16,256], W: f16[256,4096], A: f16[256,16], B: f16[16,4096]) {
  t4 = block(X, W) grid=[2,64,1] threads=128 loop=4 {
    t0 = iter(X, imap=[0,-,-], fmap=1)
    t1 = iter(W, imap=[-,1,-], fmap=0)
    t2 = matmul(t0, t1)
    t3 = acc_sum(t2)
    save(t3, omap=[0,1,-])
  }
  t5 = block(X, A) grid=[16,1,1] threads=128 loop=2 {
    t0 = iter(X, imap=[0,-,-], fmap=1)
    t1 = iter(A, imap=[-,-,-], fmap=0)
    t2 = matmul(t0, t1)
    t3 = acc_sum(t2)
    save(t3, omap=[0,-,-])
  }
  Y = block(t5, B, t4) grid=[2,64,1] threads=128 loop=1 {
    t0 = iter(t5, imap=[0,-,-])
    t1 = iter(B, imap=[-,1,-])
    t2 = iter(t4, imap=[0,1,-])
    t3 = matmul(t0, t1)
    t4 = add(t2, t3)
    t5 = acc_sum(t4)
    save(t5, omap=[0,1,-])
  }
  return Y
}
