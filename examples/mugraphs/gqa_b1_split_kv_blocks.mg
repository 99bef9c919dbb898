# spec: examples/gqa_b1.mg
# The form the search picks for gqa_b1 on the H100: split-KV flash attention whose splits are combined by a block
# op, not kernel ops. First block op: grid x over the 2 heads, y over 4 tiles of 64 query rows, z over 16 KV splits
# of 256 keys, for-loop over 4 chunks of 64 keys (Q·K, online softmax, P·V in registers). Second block op: one
# query row per block (grid 2 x 256), for-loop over the 16 splits: every thread folds the row's running sums and
# maxima in its own registers (tiles of one element, which every thread holds), no shared memory (docs/lowering.md).
kernel gqa_b1_split_kv_blocks(Q: f16[2,256,64], K: f16[2,64,4096], V: f16[2,4096,64]) {
  Ls, Os, Ms = block(Q, K, V) grid=[2,4,16] threads=128 loop=4 {
    q = iter(Q, imap=[0,1,-])
    k = iter(K, imap=[0,-,2], fmap=2)
    v = iter(V, imap=[0,-,1], fmap=1)
    s = matmul(q, k)
    m = reduce_max(s, dim=2)
    d = sub(s, m)
    e = exp(d)
    l = reduce_sum(e, dim=2)
    o = matmul(e, v)
    Lacc = acc_rescale_sum(l, m)
    Oacc = acc_rescale_sum(o, m)
    M = acc_max(m)
    save(Lacc, omap=[0,1,2])
    save(Oacc, omap=[0,1,2])
    save(M, omap=[0,1,2])
  }
  O = block(Ls, Os, Ms) grid=[2,256,1] threads=128 loop=16 {
    l = iter(Ls, imap=[0,1,-], fmap=2)
    o = iter(Os, imap=[0,1,-], fmap=2)
    m = iter(Ms, imap=[0,1,-], fmap=2)
    L = acc_rescale_sum(l, m)
    A = acc_rescale_sum(o, m)
    y = div(A, L)
    save(y, omap=[0,1,-])
  }
  return O
}
