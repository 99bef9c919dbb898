# A small flash-attention μGraph (grid over 2 heads and 2 blocks of 32 query rows, online softmax over 4 key chunks
# of 64): its tiles fit every CUDA target but not the 8 KiB synthetic target, where it needs
# LowerOptions::spill_to_global.
kernel flash_small(Q: f16[2,64,32], K: f16[2,32,256], V: f16[2,256,32]) {
  O = block(Q, K, V) grid=[2,2,1] threads=64 loop=4 {
    q = iter(Q, imap=[0,1,-])
    k = iter(K, imap=[0,-,-], fmap=2)
    v = iter(V, imap=[0,-,-], fmap=1)
    s = matmul(q, k)
    m = reduce_max(s, dim=2)
    d = sub(s, m)
    e = exp(d)
    l = reduce_sum(e, dim=2)
    o = matmul(e, v)
    L = acc_rescale_sum(l, m)
    A = acc_rescale_sum(o, m)
    y = div(A, L)
    save(y, omap=[0,1,-])
  }
  return O
}
