# Outputs that need copies: an input returned as is, and one tensor returned twice. X has column-major strides.
kernel outputs_alias(X: f32[6,10]{1,6}, Y: f32[6,10]) {
  Z = add(X, Y)
  return X, Z, Z
}
