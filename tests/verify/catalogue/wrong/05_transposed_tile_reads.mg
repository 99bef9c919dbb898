# WRONG: both input tiles are read with imap [1,0,-] but the result is saved with omap [0,1,-]: every 4x4 tile of X + Y is written at the transposed tile position.
kernel ref(X: f16[8,8], Y: f16[8,8]) {
  Z = add(X, Y)
  return Z
}

kernel cand(X: f16[8,8], Y: f16[8,8]) {
  Z = block(X, Y) grid=[2,2,1] threads=32 loop=1 {
    x = iter(X, imap=[1,0,-])
    y = iter(Y, imap=[1,0,-])
    z = add(x, y)
    a = acc_sum(z)
    save(a, omap=[0,1,-])
  }
  return Z
}
