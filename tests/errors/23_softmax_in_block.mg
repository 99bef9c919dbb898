kernel attn(Q: f16[2,256,64], K: f16[2,64,4096]) {
  P = block(Q, K) grid=[2,4,1] threads=128 loop=1 {
    q = iter(Q, imap=[0,1,-])
    k = iter(K, imap=[0,-,-])
    s = matmul(q, k)
    p = softmax(s, dim=2)
    a = acc_sum(p)
    save(a, omap=[0,1,-])
  }
  return P
}
