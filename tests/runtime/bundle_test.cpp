// The bundle reader and writer: round trips, the documented layout, exact messages for hand-crafted hostile
// files, and the file helpers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>

#include "tests/common/golden.h"
#include "tests/runtime/samples.h"

namespace morgana::bundle {
namespace {

using namespace samples;

// tiny(), with a manifest whose length is not a multiple of 16 (so that padding follows it).
Bytes good() {
  Bundle b = tiny();
  b.programs[0].mugraph += "#";
  return write_bundle(b);
}

std::string hex16(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

void expect_round_trip(const Bundle& b) {
  Bytes file = write_bundle(b);
  Result r = read_bundle(file);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(*r.bundle, with_checksums(b));
  EXPECT_EQ(write_bundle(*r.bundle), file) << "writing what was read gives the same bytes";
}

TEST(Bundle, Crc64IsCrc64Xz) {
  const std::string check = "123456789";
  EXPECT_EQ(crc64(std::span(reinterpret_cast<const uint8_t*>(check.data()), check.size())),
            0x995dc9bbdf1939faull);
  EXPECT_EQ(crc64({}), 0u);
}

TEST(Bundle, RoundTripTiny) {
  expect_round_trip(tiny());
}

TEST(Bundle, RoundTripMultiProgramMultiVariantUnicode) {
  Bundle b = multi();
  ASSERT_EQ(validate(b), std::nullopt);
  expect_round_trip(b);
}

TEST(Bundle, RoundTripEmptyWorkspaceEmptyTextScalarsAndZeroSizedTensors) {
  Bundle b = tiny();
  b.programs[0].mugraph.clear();
  b.programs[0].kernels[0].params.clear();
  expect_round_trip(b);
  b.programs[0].kernels[0].params.push_back(param("alpha", Role::input, DType::f32, {}, {}));
  b.programs[0].kernels[0].params.push_back(param("none", Role::input, DType::bf16, {0, 7}, {7, 1}));
  expect_round_trip(b);
}

TEST(Bundle, RoundTripAtTheLimits) {
  Bundle b = tiny();
  b.programs[0].name = std::string(kMaxNameBytes, 'p');
  b.programs[0].kernels[0].grid = {kMaxLaunchDim, kMaxLaunchDim, kMaxLaunchDim};
  b.programs[0].kernels[0].dynamic_smem_bytes = 0xffffffffu;
  b.programs[0].kernels[0].params[0].shape = std::vector<int64_t>(kMaxRank, 2);
  b.programs[0].kernels[0].params[0].strides = std::vector<int64_t>(kMaxRank, 1);
  b.variants[0].payload = Bytes(1, 0);
  expect_round_trip(b);
}

// The writer produces exactly the layout docs/bundle-format.md describes (rebuilt here field by field).
TEST(Bundle, WriterFollowsTheDocumentedLayout) {
  EXPECT_EQ(write_bundle(tiny()), assemble(tiny_manifest(1).b, {payload(40, 7)}, 1));
  Bundle b = tiny();
  b.programs[0].kernels[0].tensor_maps = {TensorMap{0, {8, 64}, 128}};
  Manifest m = tiny_manifest(2);
  m.b.resize(m.b.size() - 4);  // the kernel's map count was 0
  m.u32(1).u32(0).u32(2).u32(128).u32(8).u32(64);  // parameter 0, rank 2 and 3 reserved bytes, swizzle, box
  EXPECT_EQ(write_bundle(b), assemble(m.b, {payload(40, 7)}, 2));
}

// The bundle fuzzer's seeds (tests/fuzz/corpus/bundle) are the samples as the writer writes them, each twice: with
// the first byte 0 (read as it is) and 1 (the fuzzer recomputes the section checksums first; tests/fuzz/README.md).
// After a format change, MORGANA_BLESS=1 writes them again.
TEST(Bundle, FuzzSeedsAreTheSamplesAsWritten) {
  Bundle with_maps = tiny();
  with_maps.programs[0].kernels[0].tensor_maps = {TensorMap{0, {8, 64}, 128}};
  const std::vector<std::pair<std::string, Bundle>> seeds = {{"tiny", tiny()}, {"multi", multi()},
                                                             {"tensor_maps", with_maps}};
  for (const auto& [name, b] : seeds) {
    const Bytes file = write_bundle(b);
    for (char mode : {'\0', '\1'}) {
      std::string seed(1, mode);
      seed.append(file.begin(), file.end());
      morgana::testing::expect_golden("tests/fuzz/corpus/bundle/" + name + (mode ? "-resealed" : "") + ".bundle", seed);
    }
  }
}

// A bundle is written in the lowest version that expresses it: without tensor maps, version 1, which runtimes of
// version 1 read; a file declaring version 1 cannot hold tensor maps.
TEST(Bundle, WritesTheLowestVersion) {
  Bundle b = tiny();
  EXPECT_EQ(lowest_version(b), 1u);
  Result r = read_bundle(write_bundle(b));
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.bundle->format_version, 1u);
  b.programs[0].kernels[0].tensor_maps = {TensorMap{0, {8, 64}, 0}};
  EXPECT_EQ(lowest_version(b), 2u);
  r = read_bundle(write_bundle(b));
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.bundle->format_version, 2u);
  b.format_version = 1;
  EXPECT_EQ(validate(b), "bundle: format version 1 has no tensor maps (they need version 2)");
}

// A kernel's copy-engine tensor maps: written, read back, and held to the engine's rules.
TEST(Bundle, TensorMaps) {
  Bundle b = multi();
  Kernel& k = b.programs[0].kernels[0];
  k.tensor_maps = {TensorMap{1, {1, 1, 256, 64}, 128}, TensorMap{2, {1, 1, 128, 128}, 0}};
  ASSERT_EQ(validate(b), std::nullopt);
  expect_round_trip(b);
  auto broken = [&](std::function<void(TensorMap&)> f) {
    Bundle c = b;
    f(c.programs[0].kernels[0].tensor_maps[0]);
    return validate(c).value_or("valid");
  };
  const std::string at = "program 0 (attention), kernel 0 (attention_k0): tensor map 0: ";
  EXPECT_EQ(broken([](TensorMap& m) { m.param = 9; }), at + "parameter 9 does not exist");
  EXPECT_EQ(broken([](TensorMap& m) { m.param = 3; }), at + "parameter 3 is the workspace");
  EXPECT_EQ(broken([](TensorMap& m) { m.box = {1, 256, 64}; }), at + "box has 3 dimensions, parameter 1 has 4");
  EXPECT_EQ(broken([](TensorMap& m) { m.box[2] = 512; }), at + "box dimension 512 (must be 1..256)");
  EXPECT_EQ(broken([](TensorMap& m) { m.box[3] = 4; }), at + "box rows of 8 bytes (must be a multiple of 16)");
  EXPECT_EQ(broken([](TensorMap& m) { m.swizzle_bytes = 48; }), at + "swizzle 48 (must be 0, 32, 64 or 128)");
  EXPECT_EQ(broken([](TensorMap& m) { m.swizzle_bytes = 64; }), at + "box rows of 128 bytes exceed the swizzle's 64");
}

TEST(Bundle, WriterRefusesWhatTheReaderWouldReject) {
  Bundle b = tiny();
  b.programs[0].kernels[0].params[0].shape[0] = -4;
  EXPECT_EQ(validate(b),
            "program 0 (rmsnorm), kernel 0 (rmsnorm_k0), parameter 0 (x): negative dimension -4 in "
            "shape [-4, 64]");
  try {
    write_bundle(b);
    FAIL() << "write_bundle accepted an invalid bundle";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "cannot write bundle: " + *validate(b));
  }
  b = tiny();
  b.variants[0].payload.clear();
  EXPECT_EQ(validate(b), "variant 0 (h200, cubin sm_90a): empty payload");
  b = tiny();
  b.format_version = 3;
  EXPECT_EQ(validate(b), "bundle: format version 3: this code reads and writes versions 1 to 2");
}

TEST(Bundle, ContentRules) {
  auto broken = [](std::function<void(Bundle&)> f) {
    Bundle b = multi();
    f(b);
    return validate(b).value_or("valid");
  };
  EXPECT_EQ(broken([](Bundle& b) { b.programs[0].kernels[0].params[4].name = "q"; }),
            "program 0 (attention), kernel 0 (attention_k0), parameter 4 (q): same name as parameter 0");
  EXPECT_EQ(broken([](Bundle& b) { b.programs[0].kernels[1].name = "attention_k0"; }),
            "program 0 (attention), kernel 1 (attention_k0): same entry symbol as kernel 0");
  EXPECT_EQ(broken([](Bundle& b) {
              b.programs[2].variants = {3, 0, 3};
            }),
            "program 2 (lora): lists variant 3 twice");
  EXPECT_EQ(broken([](Bundle& b) {
              b.variants.push_back(b.variants[0]);
              b.programs[0].variants.push_back(4);
            }),
            "program 0 (attention): variants 0 and 4 are both h200, cubin sm_90a");
  EXPECT_EQ(broken([](Bundle& b) { b.programs[2].name = "attention"; }),
            "program 2 (attention): program 0 has the same name and also serves target a100");
  EXPECT_EQ(broken([](Bundle& b) { b.programs[1].kernels[0].block.z = 0; }),
            "program 1 (attention), kernel 0 (attention_k0): block dimension z is 0 (must be 1..2147483647)");
  EXPECT_EQ(
      broken([](Bundle& b) { b.programs[0].kernels[0].params[0].strides.pop_back(); }),
      "program 0 (attention), kernel 0 (attention_k0), parameter 0 (q): shape has 4 dimensions but strides "
      "has 3");
  EXPECT_EQ(broken([](Bundle& b) { b.programs[0].kernels[0].params[0].dtype = static_cast<DType>(9); }),
            "program 0 (attention), kernel 0 (attention_k0), parameter 0 (q): unknown dtype 9");
  EXPECT_EQ(
      broken([](Bundle& b) { b.variants[2].arch = "gfx942:xnack"; }),
      "variant 2 (mi300x, hsaco gfx942:xnack): arch 'gfx942:xnack' of an AMDGPU code object is not a target "
      "ID (gfx942:sramecc+:xnack-)");
  EXPECT_EQ(broken([](Bundle& b) { b.variants[1].arch = "sm_90a"; }),
            "variant 1 (h200, ptx sm_90a): arch 'sm_90a' of PTX is not compute_<digits>[letter]");
  EXPECT_EQ(broken([](Bundle& b) { b.programs[0].kernels.clear(); }),
            "program 0 (attention): has no kernels");
  EXPECT_EQ(
      broken([](Bundle& b) { b.programs[0].name = "9lives"; }),
      "program 0 (9lives): name '9lives' is not an identifier (letters, digits and _, not starting with a "
      "digit)");
  EXPECT_EQ(broken([](Bundle& b) { b.programs.clear(); }), "bundle: no programs");
  EXPECT_EQ(broken([](Bundle&) {}), "valid");
}

// ---- hostile files, each with its exact message ----

struct Hostile {
  const char* name;
  Bytes file;
  std::string error;
};

Bytes edit(std::function<void(Bytes&)> f, Bytes b = good()) {
  f(b);
  return b;
}

Bytes with_manifest(const Manifest& m, std::vector<Bytes> payloads = {payload(40, 7)}) {
  return assemble(m.b, payloads);
}

// tiny_manifest() up to the first parameter's name, for variations of the parameter.
Manifest upto_param() {
  Manifest m;
  m.u32(1).variant("h200", 1, "sm_90a");
  m.u32(1).program("rmsnorm", "", 0, {0});
  m.u32(1).kernel("k", {8, 1, 1, 128, 1, 1}, 0).u32(1);
  return m;
}

std::vector<Hostile> hostile_files() {
  const Bytes g = good();
  const size_t size = g.size();
  const uint64_t manifest_at = get_u64(g, entry_at(0) + kOffsetAt),
                 manifest_len = get_u64(g, entry_at(0) + kLengthAt);
  const uint64_t payload_at = get_u64(g, entry_at(1) + kOffsetAt);
  auto s = [](uint64_t v) { return std::to_string(v); };
  std::vector<Hostile> h;

  // Header.
  h.push_back({"empty file", {}, "truncated: header needs 32 bytes at offset 0, file has 0"});
  h.push_back({"truncated header", Bytes(g.begin(), g.begin() + 20),
               "truncated: header needs 32 bytes at offset 0, file has 20"});
  h.push_back({"an ELF file", edit([](Bytes& b) { b[0] = 0x7f, b[1] = 'E', b[2] = 'L', b[3] = 'F'; }),
               "not a morgana bundle (the file does not start with the bundle magic bytes)"});
  h.push_back({"line endings converted", edit([](Bytes& b) { b.erase(b.begin() + 4); }),
               "not a morgana bundle (the file does not start with the bundle magic bytes)"});
  h.push_back({"future version", edit([](Bytes& b) { set_u32(b, kVersionAt, 7); }),
               "bundle format version 7 is newer than this runtime (supports 2)"});
  h.push_back({"future version, truncated", edit([](Bytes& b) {
                 set_u32(b, kVersionAt, 7);
                 b.resize(12);
               }),
               "bundle format version 7 is newer than this runtime (supports 2)"});
  h.push_back({"version 0", edit([](Bytes& b) { set_u32(b, kVersionAt, 0); }),
               "bundle format version 0 is not valid"});
  h.push_back({"unknown flags", edit([](Bytes& b) { set_u32(b, kFlagsAt, 4); }),
               "header: flags 0x00000004 at offset 24 are not defined in format version 2"});
  h.push_back({"reserved field", edit([](Bytes& b) { set_u32(b, kReservedAt, 1); }),
               "header: reserved field at offset 28 is 0x00000001 (must be 0)"});
  h.push_back({"truncated file", edit([](Bytes& b) { b.pop_back(); }),
               "truncated: header says the file has " + s(size) + " bytes, it has " + s(size - 1)});
  h.push_back({"trailing bytes", edit([](Bytes& b) { b.insert(b.end(), 3, 0); }),
               "3 bytes after the end of the bundle (header says the file has " + s(size) +
                   " bytes, it has " + s(size + 3) + ")"});
  h.push_back({"huge section count", edit([](Bytes& b) { set_u32(b, kSectionCountAt, 0xffffffff); }),
               "header: section count 4294967295 at offset 12 is out of range (2..257)"});
  h.push_back({"section table past the end", edit([](Bytes& b) { set_u32(b, kSectionCountAt, 200); }),
               "truncated: section table needs 6400 bytes at offset 32, file has " + s(size)});

  // Section table.
  h.push_back(
      {"section far out of range",
       edit([](Bytes& b) { set_u64(b, entry_at(1) + kOffsetAt, uint64_t{1} << 40); }),
       "truncated: payload of variant 0 needs 40 bytes at offset 1099511627776, file has " + s(size)});
  h.push_back({"section length wraps around",
               edit([&](Bytes& b) { set_u64(b, entry_at(1) + kLengthAt, ~uint64_t{0}); }),
               "truncated: payload of variant 0 needs 18446744073709551615 bytes at offset " + s(payload_at) +
                   ", file has " + s(size)});
  h.push_back({"manifest extends past the end",
               edit([&](Bytes& b) { set_u64(b, entry_at(0) + kLengthAt, size); }),
               "truncated: manifest needs " + s(size) + " bytes at offset " + s(manifest_at) + ", file has " +
                   s(size)});
  h.push_back({"section inside the header", edit([](Bytes& b) { set_u64(b, entry_at(0) + kOffsetAt, 16); }),
               "section 0 (manifest) starts at offset 16, inside the header and section table (which end at "
               "offset 96)"});
  h.push_back({"overlapping sections",
               edit([&](Bytes& b) { set_u64(b, entry_at(1) + kOffsetAt, manifest_at + 8); }),
               "sections 0 (manifest) [" + s(manifest_at) + ", " + s(manifest_at + manifest_len) +
                   ") and 1 (payload of variant 0) [" + s(manifest_at + 8) + ", " + s(manifest_at + 48) +
                   ") overlap"});
  h.push_back({"unknown section kind", edit([](Bytes& b) { set_u32(b, entry_at(1) + kKindAt, 9); }),
               "section 1 at offset 64: unknown kind 9 (1 manifest, 2 payload)"});
  h.push_back({"two manifests", edit([](Bytes& b) {
                 set_u32(b, entry_at(1) + kKindAt, 1);
                 set_u32(b, entry_at(1) + kIdAt, 0);
               }),
               "sections 0 and 1 are both the manifest"});
  h.push_back({"no manifest", edit([](Bytes& b) {
                 set_u32(b, entry_at(0) + kKindAt, 2);
                 set_u32(b, entry_at(0) + kIdAt, 1);
               }),
               "no manifest section in the section table"});
  h.push_back({"huge variant id", edit([](Bytes& b) { set_u32(b, entry_at(1) + kIdAt, 0x80000000); }),
               "section 1 at offset 64: payload of variant 2147483648, beyond the limit of 256 variants"});
  h.push_back({"nonzero padding", edit([&](Bytes& b) { b[manifest_at + manifest_len] = 0x5a; }),
               "padding byte at offset " + s(manifest_at + manifest_len) +
                   " is 0x5a (bytes between sections must be 0)"});
  h.push_back({"manifest checksum mismatch", edit([&](Bytes& b) { b[manifest_at + 10] ^= 0x10; }),
               "manifest: checksum mismatch over bytes [" + s(manifest_at) + ", " +
                   s(manifest_at + manifest_len) + ")"});
  const std::string tiny_crc = hex16(crc64(payload(40, 7)));
  Bytes flipped = payload(40, 7);
  flipped[39] ^= 1;
  h.push_back({"payload checksum mismatch", edit([&](Bytes& b) { b[payload_at + 39] ^= 1; }),
               "variant 0 (h200, cubin sm_90a): checksum mismatch over bytes [" + s(payload_at) + ", " +
                   s(payload_at + 40) + "): manifest " + tiny_crc + ", section table " + tiny_crc +
                   ", payload " + hex16(crc64(flipped))});
  {
    Bundle two = tiny();
    two.variants.push_back(Variant{"h200", VariantKind::ptx, "compute_90a", payload(50, 9), 0});
    two.programs[0].variants = {0, 1};
    Bytes f = write_bundle(two);
    set_u32(f, entry_at(1) + kIdAt, 1);
    set_u32(f, entry_at(2) + kIdAt, 0);
    const std::string ptx_crc = hex16(crc64(payload(50, 9)));
    const uint64_t ptx_at = get_u64(f, entry_at(2) + kOffsetAt);
    h.push_back({"payload sections swapped", f,
                 "variant 0 (h200, cubin sm_90a): checksum mismatch over bytes [" + s(ptx_at) + ", " +
                     s(ptx_at + 50) + "): manifest " + tiny_crc + ", section table " + ptx_crc +
                     ", payload " + ptx_crc});
  }
  h.push_back({"payload of an unknown variant", edit([](Bytes& b) { set_u32(b, entry_at(1) + kIdAt, 5); }),
               "section 1 holds the payload of variant 5, but the manifest lists 1 variants"});

  // Manifest structure (hand-built manifests, correct checksums).
  h.push_back({"huge variant count", with_manifest(Manifest().u32(0xffffffff)),
               "manifest: variant count 4294967295 at offset 96 exceeds the limit 256"});
  h.push_back(
      {"count larger than the manifest", with_manifest(Manifest().u32(200)),
       "manifest is truncated: variant count 200 at offset 96 needs at least 4000 more bytes, the manifest "
       "has 0 left"});
  h.push_back({"huge string length", with_manifest(Manifest().u32(1).u32(0xfffffff0).u64(0).u64(0).u64(0)),
               "manifest: variant 0: target length 4294967280 at offset 100 exceeds the limit 256"});
  h.push_back({"string past the end of the manifest",
               with_manifest(Manifest().u32(1).u32(100).u64(0).u64(0).u64(0)),
               "manifest is truncated: variant 0: target needs 100 bytes at offset 104, the manifest ends at "
               "offset 128"});
  h.push_back({"unknown variant kind", with_manifest(Manifest().u32(1).variant("h200", 9, "sm_90a").u32(0)),
               "manifest: variant 0: unknown variant kind 9 at offset 108 (1 cubin, 2 ptx, 3 hsaco)"});
  h.push_back({"nonzero reserved byte",
               with_manifest(Manifest().u32(1).str("h200").u8(1).u8(0).u8(7).u8(0).str("sm_90a")),
               "manifest: variant 0: reserved byte at offset 110 is 0x07 (must be 0)"});
  h.push_back(
      {"huge kernel count",
       with_manifest(
           Manifest().u32(1).variant("h200", 1, "sm_90a").u32(1).program("p", "", 0, {0}).u32(1u << 31)),
       "manifest: program 0 (p): kernel count 2147483648 at offset 159 exceeds the limit 256"});
  h.push_back({"unknown dtype", with_manifest(upto_param().param("x", 1, 7, {8}, {1})),
               "manifest: program 0 (rmsnorm), kernel 0 (k), parameter 0 (x): unknown dtype 7 at offset 212 "
               "(1 f16, 2 bf16, 3 f32)"});
  h.push_back(
      {"rank too high",
       with_manifest(upto_param().param("x", 1, 1, std::vector<int64_t>(9, 1), std::vector<int64_t>(9, 1))),
       "manifest: program 0 (rmsnorm), kernel 0 (k), parameter 0 (x): rank 9 at offset 213 exceeds the limit "
       "8"});
  h.push_back({"unread bytes after the manifest", with_manifest(tiny_manifest().u32(0)),
               "manifest: 4 unread bytes at offset 332 after the last program"});

  // Content (well-formed manifests that say something impossible).
  h.push_back({"missing variant",
               with_manifest(Manifest()
                                 .u32(1)
                                 .variant("h200", 1, "sm_90a")
                                 .u32(1)
                                 .program("rmsnorm", "", 0, {3})
                                 .u32(1)
                                 .kernel("k", {8, 1, 1, 128, 1, 1}, 0)
                                 .u32(0)),
               "program 0 (rmsnorm) at offset 134: refers to variant 3, but the bundle has 1 variants"});
  h.push_back({"variant without payload",
               with_manifest(Manifest()
                                 .u32(2)
                                 .variant("h200", 1, "sm_90a")
                                 .variant("h200", 2, "compute_90")
                                 .u32(1)
                                 .program("rmsnorm", "", 0, {0, 1})
                                 .u32(1)
                                 .kernel("k", {8, 1, 1, 128, 1, 1}, 0)
                                 .u32(0)),
               "variant 1 (h200, ptx compute_90): no payload section"});
  h.push_back(
      {"negative shape", with_manifest(upto_param().param("x", 1, 1, {-4, 64}, {64, 1})),
       "program 0 (rmsnorm), kernel 0 (k), parameter 0 (x) at offset 206: negative dimension -4 in shape "
       "[-4, 64]"});
  h.push_back({"strides overflow",
               with_manifest(upto_param().param("x", 1, 3, {1 << 20, 1 << 20}, {int64_t{1} << 42, 1})),
               "program 0 (rmsnorm), kernel 0 (k), parameter 0 (x) at offset 206: shape [1048576, 1048576] "
               "with strides "
               "[4398046511104, 1] spans more than 2^62 bytes"});
  h.push_back(
      {"zero grid dimension",
       with_manifest(Manifest()
                         .u32(1)
                         .variant("h200", 1, "sm_90a")
                         .u32(1)
                         .program("rmsnorm", "", 0, {0})
                         .u32(1)
                         .kernel("k", {8, 0, 1, 128, 1, 1}, 0)
                         .u32(0)),
       "program 0 (rmsnorm), kernel 0 (k) at offset 169: grid dimension y is 0 (must be 1..2147483647)"});
  h.push_back(
      {"arch of another vendor",
       with_manifest(Manifest()
                         .u32(1)
                         .variant("h200", 1, "gfx942")
                         .u32(1)
                         .program("rmsnorm", "", 0, {0})
                         .u32(1)
                         .kernel("k", {8, 1, 1, 128, 1, 1}, 0)
                         .u32(0)),
       "variant 0 (h200, cubin gfx942) at offset 100: arch 'gfx942' of a cubin is not sm_<digits>[letter]"});
  h.push_back({"μGraph text not UTF-8",
               with_manifest(Manifest()
                                 .u32(1)
                                 .variant("h200", 1, "sm_90a")
                                 .u32(1)
                                 .program("rmsnorm", "ok \xc0\x80", 0, {0})
                                 .u32(1)
                                 .kernel("k", {8, 1, 1, 128, 1, 1}, 0)
                                 .u32(0)),
               "program 0 (rmsnorm) at offset 134: μGraph text is not UTF-8 text: byte 0xc0 at position 3"});
  h.push_back({"two programs of one name for one target",
               with_manifest(Manifest()
                                 .u32(1)
                                 .variant("h200", 1, "sm_90a")
                                 .u32(2)
                                 .program("p", "", 0, {0})
                                 .u32(1)
                                 .kernel("k", {1, 1, 1, 1, 1, 1}, 0)
                                 .u32(0)
                                 .program("p", "", 0, {0})
                                 .u32(1)
                                 .kernel("k", {1, 1, 1, 1, 1, 1}, 0)
                                 .u32(0)),
               "program 1 (p) at offset 200: program 0 has the same name and also serves target h200"});
  h.push_back(
      {"workspace parameter beyond the workspace",
       with_manifest(Manifest()
                         .u32(1)
                         .variant("h200", 1, "sm_90a")
                         .u32(1)
                         .program("p", "", 64, {0})
                         .u32(1)
                         .kernel("k", {1, 1, 1, 1, 1, 1}, 0)
                         .u32(1)
                         .param("ws", 3, 3, {17}, {1})),
       "program 0 (p), kernel 0 (k), parameter 0 (ws) at offset 200: workspace parameter spans 68 bytes but "
       "the program's workspace is 64 bytes"});
  h.push_back({"empty payload",
               with_manifest(Manifest()
                                 .u32(1)
                                 .variant("h200", 1, "sm_90a", crc64({}))
                                 .u32(1)
                                 .program("rmsnorm", "", 0, {0})
                                 .u32(1)
                                 .kernel("k", {8, 1, 1, 128, 1, 1}, 0)
                                 .u32(0),
                             {Bytes{}}),
               "variant 0 (h200, cubin sm_90a) at offset 100: empty payload"});
  h.push_back(
      {"control characters in a name",
       with_manifest(Manifest()
                         .u32(1)
                         .variant("h\x1b[2J", 1, "sm_90a")
                         .u32(1)
                         .program("rmsnorm", "", 0, {0})
                         .u32(1)
                         .kernel("k", {8, 1, 1, 128, 1, 1}, 0)
                         .u32(0)),
       "variant 0 (h\\x1b[2J, cubin sm_90a) at offset 100: target name 'h\\x1b[2J' is not a target file name "
       "(letters, digits, _ - .)"});
  return h;
}

TEST(Bundle, HostileFilesGiveExactMessages) {
  std::vector<Hostile> cases = hostile_files();
  EXPECT_GE(cases.size(), 15u);
  for (const Hostile& c : cases) {
    Result r = read_bundle(c.file);
    EXPECT_FALSE(r.ok()) << c.name << ": accepted";
    EXPECT_EQ(r.error, c.error) << c.name;
  }
}

// ---- files ----

class BundleFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("morgana_bundle_test_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(BundleFile, WriteThenRead) {
  std::string path = (dir_ / "out.mgb").string();
  ASSERT_TRUE(write_bundle_file(path, multi()).ok());
  Result r = read_bundle_file(path);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(*r.bundle, with_checksums(multi()));
  // Only the bundle is left in the folder: the temporary file was renamed.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), std::filesystem::directory_iterator()),
            1);
}

TEST_F(BundleFile, AFailedWriteLeavesTheOldFile) {
  std::string path = (dir_ / "out.mgb").string();
  ASSERT_TRUE(write_bundle_file(path, tiny()).ok());
  Bundle bad = multi();
  bad.programs[1].variants = {9};
  Status s = write_bundle_file(path, bad);
  EXPECT_EQ(s.error,
            path +
                ": cannot write bundle: program 1 (attention): refers to variant 9, but the bundle has 4 "
                "variants");
  Result r = read_bundle_file(path);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(*r.bundle, with_checksums(tiny()));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), std::filesystem::directory_iterator()),
            1);

  Status nodir = write_bundle_file((dir_ / "no" / "such.mgb").string(), tiny());
  EXPECT_NE(nodir.error.find("cannot create"), std::string::npos) << nodir.error;
  EXPECT_NE(nodir.error.find("No such file or directory"), std::string::npos) << nodir.error;
}

TEST_F(BundleFile, ReadErrorsNameTheFile) {
  std::string missing = (dir_ / "missing.mgb").string();
  EXPECT_EQ(read_bundle_file(missing).error, missing + ": cannot open: No such file or directory");
  EXPECT_EQ(read_bundle_file(dir_.string()).error, dir_.string() + ": not a regular file");
  std::string text = (dir_ / "notes.txt").string();
  std::ofstream(text) << "hello\n";
  EXPECT_EQ(read_bundle_file(text).error,
            text + ": not a morgana bundle (the file does not start with the bundle magic bytes)");
}

}  // namespace
}  // namespace morgana::bundle
