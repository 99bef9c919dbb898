# rms_norm over rows as a block op: grid x over 4 tiles of 2 whole rows.
kernel ref(X: f16[8,16]) {
  Y = rms_norm(X, dim=1)
  return Y
}

kernel cand(X: f16[8,16]) {
  Y = block(X) grid=[4,1,1] threads=32 loop=1 {
    x = iter(X, imap=[0,-,-])
    y = rms_norm(x, dim=1)
    a = acc_sum(y)
    save(a, omap=[0,-,-])
  }
  return Y
}
