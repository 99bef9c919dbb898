# nTrans rms_norm(X + alpha * (rms_norm(H) - X)) in one block op: grid x over 2 tiles of 2 whole rows.
kernel ref(H: f16[4,16], X: f16[4,16], alpha: f16[4,16]) {
  HN = rms_norm(H, dim=1)
  D = sub(HN, X)
  AD = mul(alpha, D)
  Z = add(X, AD)
  Y = rms_norm(Z, dim=1)
  return Y
}

kernel cand(H: f16[4,16], X: f16[4,16], alpha: f16[4,16]) {
  Y = block(H, X, alpha) grid=[2,1,1] threads=64 loop=1 {
    h = iter(H, imap=[0,-,-])
    x = iter(X, imap=[0,-,-])
    al = iter(alpha, imap=[0,-,-])
    hn = rms_norm(h, dim=1)
    d = sub(hn, x)
    ad = mul(al, d)
    z = add(x, ad)
    y = rms_norm(z, dim=1)
    a = acc_sum(y)
    save(a, omap=[0,-,-])
  }
  return Y
}
