# rms_norm and softmax over odd dims, including a leading dim.
kernel norms_odd(X: bf16[5,1000], Y: f32[3,7,77]) {
  N = rms_norm(X, dim=1, eps=1e-05)
  S = softmax(Y, dim=2)
  T = softmax(Y, dim=0)
  R = rms_norm(Y, dim=1)
  return N, S, T, R
}
