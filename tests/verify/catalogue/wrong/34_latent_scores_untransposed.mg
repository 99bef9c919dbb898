# WRONG: the scores read the latent cache itself where they need its transpose (a square cache, so shapes agree).
kernel ref(Q: f16[4,1,16], C: f16[16,16]) {
  Ct = transpose(C)
  A = matmul(Q, Ct)
  S = softmax(A, dim=2)
  O = matmul(S, C)
  return O
}

kernel cand(Q: f16[4,1,16], C: f16[16,16]) {
  A = matmul(Q, C)
  S = softmax(A, dim=2)
  O = matmul(S, C)
  return O
}
