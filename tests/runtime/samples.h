// Sample bundles and a test-side encoder of the bundle layout, written from docs/bundle-format.md rather than
// from runtime/bundle.cpp, so that hostile files can be built field by field and the writer can be checked
// against the document.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/bundle.h"

namespace morgana::bundle::samples {

using Bytes = std::vector<uint8_t>;

inline Bytes payload(size_t n, uint8_t seed) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + 31 * i + (i >> 3));
  return b;
}

inline Parameter param(std::string name, Role role, DType dtype, std::vector<int64_t> shape,
                       std::vector<int64_t> strides) {
  return Parameter{std::move(name), role, dtype, std::move(shape), std::move(strides)};
}

// The smallest useful bundle: one program, one kernel, one variant.
inline Bundle tiny() {
  Bundle b;
  Kernel k{"rmsnorm_k0",
           {8, 1, 1},
           {128, 1, 1},
           1024,
           {param("x", Role::input, DType::f16, {8, 64}, {64, 1}),
            param("y", Role::output, DType::f16, {8, 64}, {64, 1})}};
  b.programs.push_back(Program{"rmsnorm", "kernel rmsnorm(x: f16[8, 64]) -> y\n", 0, {k}, {0}});
  b.variants.push_back(Variant{"h200", VariantKind::cubin, "sm_90a", payload(40, 7), 0});
  return b;
}

// Two programs of one name for different targets, a second program with a workspace, four variants, unicode
// text.
inline Bundle multi() {
  Bundle b;
  b.variants.push_back(Variant{"h200", VariantKind::cubin, "sm_90a", payload(300, 1), 0});
  b.variants.push_back(Variant{"h200", VariantKind::ptx, "compute_90a", payload(120, 2), 0});
  b.variants.push_back(Variant{"mi300x", VariantKind::hsaco, "gfx942:sramecc+:xnack-", payload(200, 3), 0});
  b.variants.push_back(Variant{"a100", VariantKind::cubin, "sm_80", payload(77, 4), 0});

  Kernel attn{"attention_k0",
              {32, 8, 2},
              {128, 1, 1},
              49152,
              {param("q", Role::input, DType::bf16, {2, 8, 1, 128}, {1024, 128, 128, 1}),
               param("k", Role::input, DType::bf16, {2, 8, 4096, 128}, {4194304, 524288, 128, 1}),
               param("v", Role::input, DType::bf16, {2, 8, 4096, 128}, {4194304, 524288, 128, 1}),
               param("ws", Role::workspace, DType::f32, {2, 8, 32, 130}, {33280, 4160, 130, 1}),
               param("o", Role::output, DType::bf16, {2, 8, 1, 128}, {1024, 128, 128, 1})}};
  Kernel reduce{"attention_k1",
                {2, 8, 1},
                {256, 1, 1},
                0,
                {param("ws", Role::workspace, DType::f32, {2, 8, 32, 130}, {33280, 4160, 130, 1}),
                 param("o", Role::output, DType::bf16, {2, 8, 1, 128}, {1024, 128, 128, 1})}};
  b.programs.push_back(Program{"attention",
                               "# μGraph für Aufmerksamkeit — 注意力 ✓\nkernel attention(q, k, v) -> o\n",
                               2 * 8 * 32 * 130 * 4,
                               {attn, reduce},
                               {0, 1, 3}});
  Kernel amd{"attention_k0",
             {64, 8, 1},
             {256, 1, 1},
             65536,
             {param("q", Role::input, DType::bf16, {2, 8, 1, 128}, {1024, 128, 128, 1}),
              param("k", Role::input, DType::bf16, {2, 8, 4096, 128}, {4194304, 524288, 128, 1}),
              param("v", Role::input, DType::bf16, {2, 8, 4096, 128}, {4194304, 524288, 128, 1}),
              param("o", Role::output, DType::bf16, {2, 8, 1, 128}, {1024, 128, 128, 1})}};
  b.programs.push_back(Program{"attention", "", 0, {amd}, {2}});
  Kernel lora{
      "lora_k0",
      {1, 1, 1},
      {1, 1, 1},
      0,
      {param("s", Role::input, DType::f32, {}, {}), param("y", Role::output, DType::f32, {0, 4}, {4, 1})}};
  b.programs.push_back(Program{"lora", "kernel lora() ‼\r\n\ttab\n", 0, {lora}, {3, 0}});
  return b;
}

// What read_bundle returns for `b`: the checksums filled in.
// b as read back from write_bundle(b): checksums filled in, the version the writer chose.
inline Bundle with_checksums(Bundle b) {
  for (Variant& v : b.variants) v.checksum = crc64(v.payload);
  b.format_version = lowest_version(b);
  return b;
}

inline void set_u32(Bytes& f, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) f.at(at + i) = static_cast<uint8_t>(v >> (8 * i));
}
inline void set_u64(Bytes& f, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) f.at(at + i) = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t get_u32(const Bytes& f, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{f.at(at + i)} << (8 * i);
  return v;
}
inline uint64_t get_u64(const Bytes& f, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{f.at(at + i)} << (8 * i);
  return v;
}

// Header and section table fields (docs/bundle-format.md).
constexpr size_t kVersionAt = 8, kSectionCountAt = 12, kFileBytesAt = 16, kFlagsAt = 24, kReservedAt = 28;
constexpr size_t entry_at(size_t i) {
  return 32 + 32 * i;
}
constexpr size_t kKindAt = 0, kIdAt = 4, kOffsetAt = 8, kLengthAt = 16, kChecksumAt = 24;

// Recomputes every section's checksum from the bytes its table entry names; entries past the end of the file and
// sections outside it are left alone (the fuzzer reseals whatever it made, tests/fuzz/fuzz_bundle.cpp).
inline void reseal(Bytes& f) {
  if (f.size() < entry_at(0)) return;
  uint32_t n = get_u32(f, kSectionCountAt);
  for (uint32_t i = 0; i < n && entry_at(i) + kChecksumAt + 8 <= f.size(); ++i) {
    uint64_t off = get_u64(f, entry_at(i) + kOffsetAt), len = get_u64(f, entry_at(i) + kLengthAt);
    if (off <= f.size() && len <= f.size() - off)
      set_u64(f, entry_at(i) + kChecksumAt, crc64(std::span<const uint8_t>(f).subspan(off, len)));
  }
}

// A manifest built by hand, field by field.
struct Manifest {
  Bytes b;
  Manifest& u8(uint8_t v) {
    b.push_back(v);
    return *this;
  }
  Manifest& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Manifest& u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Manifest& str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  // The checksum defaults to that of tiny()'s payload.
  Manifest& variant(const std::string& target, uint8_t kind, const std::string& arch,
                    uint64_t checksum = crc64(payload(40, 7))) {
    return str(target).u8(kind).u8(0).u8(0).u8(0).str(arch).u64(checksum);
  }
  // name, μGraph, workspace, variant references
  Manifest& program(const std::string& name, const std::string& mugraph, uint64_t workspace,
                    const std::vector<uint32_t>& refs) {
    str(name).str(mugraph).u64(workspace).u32(static_cast<uint32_t>(refs.size()));
    for (uint32_t r : refs) u32(r);
    return *this;
  }
  Manifest& kernel(const std::string& name, std::array<uint32_t, 6> launch, uint32_t smem) {
    str(name);
    for (uint32_t d : launch) u32(d);
    return u32(smem);
  }
  Manifest& param(const std::string& name, uint8_t role, uint8_t dtype, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides) {
    str(name).u8(role).u8(dtype).u8(static_cast<uint8_t>(shape.size())).u8(0);
    for (int64_t d : shape) u64(static_cast<uint64_t>(d));
    for (int64_t s : strides) u64(static_cast<uint64_t>(s));
    return *this;
  }
};

// tiny()'s manifest, by hand.
// tiny()'s manifest in format `version` (2 ends each kernel record with its tensor-map count, here 0).
inline Manifest tiny_manifest(uint32_t version = 1) {
  Manifest m;
  m.u32(1).variant("h200", 1, "sm_90a");
  m.u32(1).program("rmsnorm", "kernel rmsnorm(x: f16[8, 64]) -> y\n", 0, {0});
  m.u32(1).kernel("rmsnorm_k0", {8, 1, 1, 128, 1, 1}, 1024).u32(2);
  m.param("x", 1, 1, {8, 64}, {64, 1}).param("y", 2, 1, {8, 64}, {64, 1});
  if (version >= 2) m.u32(0);
  return m;
}

// A whole file (format `version`; the manifest must be written in it) around a manifest and payloads: header, table (manifest, then payload i as variant i), each
// section at a multiple of 16, correct checksums.
inline Bytes assemble(const Bytes& manifest, const std::vector<Bytes>& payloads, uint32_t version = 1) {
  auto align = [](size_t x) { return (x + 15) / 16 * 16; };
  const size_t n = 1 + payloads.size();
  std::vector<size_t> offsets{align(32 + 32 * n)};
  size_t end = offsets[0] + manifest.size();
  for (const Bytes& p : payloads) {
    offsets.push_back(align(end));
    end = offsets.back() + p.size();
  }
  Bytes f(end, 0);
  const uint8_t magic[8] = {0x89, 'M', 'G', 'B', '\r', '\n', 0x1a, '\n'};
  std::copy(magic, magic + 8, f.begin());
  set_u32(f, kVersionAt, version);
  set_u32(f, kSectionCountAt, static_cast<uint32_t>(n));
  set_u64(f, kFileBytesAt, end);
  for (size_t i = 0; i < n; ++i) {
    const Bytes& data = i == 0 ? manifest : payloads[i - 1];
    set_u32(f, entry_at(i) + kKindAt, i == 0 ? 1 : 2);
    set_u32(f, entry_at(i) + kIdAt, i == 0 ? 0 : static_cast<uint32_t>(i - 1));
    set_u64(f, entry_at(i) + kOffsetAt, offsets[i]);
    set_u64(f, entry_at(i) + kLengthAt, data.size());
    std::copy(data.begin(), data.end(), f.begin() + static_cast<std::ptrdiff_t>(offsets[i]));
  }
  reseal(f);
  return f;
}

}  // namespace morgana::bundle::samples
