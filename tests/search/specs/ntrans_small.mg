# nTrans at a small size: rms_norm(X + alpha * (rms_norm(H) - X)), norms over dim 1.
kernel ntrans_small(H: f16[2,256], X: f16[2,256], alpha: f16[2,256]) {
  HN = rms_norm(H, dim=1)
  D = sub(HN, X)
  AD = mul(alpha, D)
  Z = add(X, AD)
  Y = rms_norm(Z, dim=1)
  return Y
}
