# Shapes that divide no tile: a batch of 3, M = 5, K = 1000, N = 77, with the weight broadcast over the batch.
kernel ragged_matmul(X: f16[3,5,1000], W: f16[1000,77]) {
  Y = matmul(X, W)
  return Y
}
