# QK-norm attention in one block: Q and K normalized in f32, then stored in f16 for Q·Kᵀ (choose_instructions
# narrows a matmul's computed operands to the type its matrix instruction takes, and swizzles them), S and P in
# registers.
kernel flash_qknorm(Q: f16[2,32,32], K: f16[2,32,128], V: f16[2,128,32]) {
  O = block(Q, K, V) grid=[2,1,1] threads=64 loop=2 {
    q = iter(Q, imap=[0,-,-])
    k = iter(K, imap=[0,-,-], fmap=2)
    v = iter(V, imap=[0,-,-], fmap=1)
    qn = rms_norm(q, dim=2)
    kn = rms_norm(k, dim=1)
    s = matmul(qn, kn)
    m = reduce_max(s, dim=2)
    d = sub(s, m)
    e = exp(d)
    l = reduce_sum(e, dim=2)
    o = matmul(e, v)
    L = acc_rescale_sum(l, m)
    A = acc_rescale_sum(o, m)
    y = div(A, L)
    save(y, omap=[0,-,-])
  }
  return O
}
