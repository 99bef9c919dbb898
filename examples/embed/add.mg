# The embedding example's program (examples/embed/README.md): c = a + b over f32[1000].
kernel add(a: f32[1000], b: f32[1000]) {
  c = add(a, b)
  return c
}
