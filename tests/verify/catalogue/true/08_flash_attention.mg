# Flash attention in one block op: grid x over 2 heads, grid y over 2 tiles of 2 query rows; the for-loop walks the
# 32 keys in 4 chunks of 8 with max subtraction and online rescaling; the epilogue divides by the denominator.
kernel ref(Q: f16[2,4,8], K: f16[2,8,32], V: f16[2,32,8]) {
  A = matmul(Q, K)
  S = softmax(A, dim=2)
  O = matmul(S, V)
  return O
}

kernel cand(Q: f16[2,4,8], K: f16[2,8,32], V: f16[2,32,8]) {
  O = block(Q, K, V) grid=[2,2,1] threads=128 loop=4 {
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
