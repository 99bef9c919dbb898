# nTrans (normalized transformer update), batch b=8: H, X, alpha all (b,4096);
# rms_norm(X + alpha * (rms_norm(H) - X)), every norm over dim 1.
kernel ntrans(H: f16[8,4096], X: f16[8,4096], alpha: f16[8,4096]) {
  HN = rms_norm(H, dim=1)
  D = sub(HN, X)
  AD = mul(alpha, D)
  Z = add(X, AD)
  Y = rms_norm(Z, dim=1)
  return Y
}
