// The bundle: one file holding every compiled program of a build and a binary variant per target
// (docs/bundle-format.md). The compiler writes it with write_bundle; the runtime and `morgana inspect` read
// it with read_bundle. This file is part of the runtime, so it sees the C++ standard library and nothing else
// of morgana.
//
// The reader never trusts the file: every count, length and offset is checked against the bytes that remain
// and against a fixed limit before it is used, and nothing is allocated from an unchecked number. A bad file
// gives an error message naming what is wrong and at which byte offset; no exception leaves read_bundle.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace morgana::bundle {

// The format version this code writes, and the newest it reads.
inline constexpr uint32_t kFormatVersion = 2;  // 2 added tensor maps to kernel records; version 1 files still read

// Limits on what a bundle may hold. They are far above what a real build produces and low enough that a
// hostile file cannot make the reader allocate or loop without bound. docs/bundle-format.md lists them with
// their reasons.
inline constexpr uint64_t kMaxFileBytes = uint64_t{4} << 30;  // read_bundle_file refuses larger files
inline constexpr uint64_t kMaxManifestBytes = uint64_t{64} << 20;
inline constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 30;  // one variant's code object
inline constexpr uint32_t kMaxVariants = 256;
inline constexpr uint32_t kMaxSections = kMaxVariants + 1;  // the manifest and one payload per variant
inline constexpr uint32_t kMaxPrograms = 1024;
inline constexpr uint32_t kMaxKernelsPerProgram = 256;
inline constexpr uint32_t kMaxParamsPerKernel = 256;
inline constexpr uint32_t kMaxRank = 8;
inline constexpr uint32_t kMaxTensorMapsPerKernel = 16;
inline constexpr uint32_t kMaxTensorMapRank = 5;  // the copy engine's (cuTensorMapEncodeTiled)
inline constexpr uint32_t kMaxTensorMapBox = 256;  // elements per box dimension
inline constexpr uint32_t kMaxNameBytes = 256;  // names, entry symbols, targets, archs
inline constexpr uint32_t kMaxMugraphBytes = 16u << 20;
inline constexpr uint32_t kMaxLaunchDim = 0x7fffffff;  // each grid/block dimension is 1..this
inline constexpr uint64_t kMaxWorkspaceBytes = uint64_t{1} << 48;
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 62;  // first to last element of a parameter
// Totals over the whole bundle, so that a small file of minimal records cannot make the reader build a model
// many times its own size.
inline constexpr uint64_t kMaxTotalKernels = 16384;
inline constexpr uint64_t kMaxTotalParams = 262144;

enum class DType : uint8_t { f16 = 1, bf16 = 2, f32 = 3 };
enum class Role : uint8_t { input = 1, output = 2, workspace = 3 };
// cubin: SASS for one sm_XY; ptx: PTX text for compute_XY and later; hsaco: an AMDGPU code object for one
// target ID.
enum class VariantKind : uint8_t { cubin = 1, ptx = 2, hsaco = 3 };

std::string_view name(DType d);        // "f16", "bf16", "f32"
std::string_view name(Role r);         // "input", "output", "workspace"
std::string_view name(VariantKind k);  // "cubin", "ptx", "hsaco"
uint32_t size_bytes(DType d);

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  bool operator==(const Dim3&) const = default;
};

// One kernel argument, in launch order. shape and strides (in elements) have the same length, the rank
// (0..kMaxRank).
struct Parameter {
  std::string name;
  Role role = Role::input;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  bool operator==(const Parameter&) const = default;
};

// A tensor as NVIDIA's copy engine (TMA) sees it: the runtime builds the map at launch from parameter `param` (its
// pointer, shape, strides and dtype), a box of `box` elements per dimension (outermost first, the parameter's rank)
// and the swizzle, and passes it by value after the parameters (and the workspace), in the kernel's list order.
struct TensorMap {
  uint32_t param = 0;
  std::vector<uint32_t> box;
  uint32_t swizzle_bytes = 0;  // 0, 32, 64 or 128
  bool operator==(const TensorMap&) const = default;
};

struct Kernel {
  std::string name;  // the entry symbol in every variant of its program
  Dim3 grid;
  Dim3 block;
  uint32_t dynamic_smem_bytes = 0;
  std::vector<Parameter> params;
  std::vector<TensorMap> tensor_maps;
  bool operator==(const Kernel&) const = default;
};

// A program is what a caller launches by name: its kernels run in order on one stream. The same name may
// appear more than once when each copy serves other targets (the search picks a μGraph per GPU); `variants`
// lists the indices (into Bundle::variants) of the code objects that hold this program's kernels.
struct Program {
  std::string name;
  std::string mugraph;  // the μGraph text, UTF-8, for inspection only
  uint64_t workspace_bytes = 0;
  std::vector<Kernel> kernels;
  std::vector<uint32_t> variants;
  bool operator==(const Program&) const = default;
};

struct Variant {
  std::string target;  // a target file's name, e.g. "h200"
  VariantKind kind = VariantKind::cubin;
  std::string arch;  // "sm_90a", "compute_80", "gfx942:sramecc+:xnack-"
  std::vector<uint8_t> payload;
  // CRC-64 of payload: read_bundle fills it in after checking it; write_bundle computes it and ignores this
  // value.
  uint64_t checksum = 0;
  bool operator==(const Variant&) const = default;
};

struct Bundle {
  // The file's version: read_bundle fills it in; write_bundle ignores it and writes lowest_version().
  uint32_t format_version = kFormatVersion;
  std::vector<Program> programs;
  std::vector<Variant> variants;
  bool operator==(const Bundle&) const = default;
};

// Either a bundle or a one-line message saying what is wrong, with the byte offset where one applies.
struct Result {
  std::optional<Bundle> bundle;
  std::string error;
  bool io_error = false;  // read_bundle_file could not read the file (rather than: the bytes are no bundle)
  bool ok() const { return bundle.has_value(); }
};

// Empty error on success.
struct Status {
  std::string error;
  bool ok() const { return error.empty(); }
};

// The lowest format version that can express `b` (2 where a kernel has tensor maps, else 1): what write_bundle
// writes, so that runtimes of an older version read whatever uses nothing newer.
uint32_t lowest_version(const Bundle& b);

// CRC-64/XZ (ECMA-182 polynomial, reflected, initial value and final xor all ones) of `bytes`.
uint64_t crc64(std::span<const uint8_t> bytes);

// The content rules that both sides enforce (names, launch geometry, shapes, variant references, ...).
// Returns the first broken rule, or nothing when the bundle is valid. read_bundle applies it to everything it
// decodes.
std::optional<std::string> validate(const Bundle& b);

// `s` made safe for a one-line message: printable ASCII kept, other bytes as \xNN, cut after 64 bytes.
std::string printable(std::string_view s);

// "variant 2 (h200, cubin sm_90a)"
std::string describe_variant(const Bundle& b, size_t index);

// The file's bytes. Throws std::invalid_argument with validate's message when the bundle is not valid; that
// is a bug in the caller, which built it.
std::vector<uint8_t> write_bundle(const Bundle& b);

// Never throws.
Result read_bundle(std::span<const uint8_t> bytes);

// Writes a temporary file next to `path`, flushes it to disk and renames it over `path`, so that a failure
// leaves any previous file intact. Never throws.
Status write_bundle_file(const std::string& path, const Bundle& b);

// read_bundle on the file's contents; messages start with "PATH: ". Never throws.
Result read_bundle_file(const std::string& path);

}  // namespace morgana::bundle
