# spec: examples/gqa_b1.mg
# Flash attention in one block op. Grid x over the 2 batch heads, grid y over 4 tiles
# of 64 query rows; the for-loop walks the 4096 keys in 16 chunks of 256 with online softmax (acc_rescale_sum), and
# the epilogue divides by the softmax denominator.
kernel gqa_b1_flash(Q: f16[2,256,64], K: f16[2,64,4096], V: f16[2,4096,64]) {
  O = block(Q, K, V) grid=[2,4,1] threads=128 loop=16 {
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
