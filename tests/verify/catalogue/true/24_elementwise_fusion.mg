# gelu(X) * relu(Z) + X fused into one block op over 2 x 2 tiles.
kernel ref(X: f16[4,16], Z: f16[4,16]) {
  G = gelu(X)
  R = relu(Z)
  P = mul(G, R)
  Y = add(P, X)
  return Y
}

kernel cand(X: f16[4,16], Z: f16[4,16]) {
  Y = block(X, Z) grid=[2,2,1] threads=32 loop=1 {
    x = iter(X, imap=[0,1,-])
    z = iter(Z, imap=[0,1,-])
    g = gelu(x)
    r = relu(z)
    p = mul(g, r)
    y = add(p, x)
    a = acc_sum(y)
    save(a, omap=[0,1,-])
  }
  return Y
}
