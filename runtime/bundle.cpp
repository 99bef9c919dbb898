// Reader and writer of the bundle file. docs/bundle-format.md is the layout; this file follows it top to
// bottom: header, section table, manifest, payloads. The content rules (check_bundle) are shared by both
// directions, so the writer cannot produce a file the reader rejects and the reader accepts nothing the
// writer would refuse.
//
// Inside the reader a broken rule throws Failure, which read_bundle turns into its error; nothing else is
// thrown on purpose, and read_bundle catches everything else too (out of memory, a bug) so that no exception
// escapes.
#include "bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <stdexcept>
#include <system_error>
#include <tuple>

namespace morgana::bundle {
namespace {

// "\x89MGB\r\n\x1a\n", after PNG: the high bit catches 7-bit transfers, CR LF and LF catch line-ending
// conversion, ^Z stops a DOS `type`.
constexpr std::array<uint8_t, 8> kMagic = {0x89, 'M', 'G', 'B', '\r', '\n', 0x1a, '\n'};
constexpr uint64_t kHeaderBytes = 32;
constexpr uint64_t kSectionEntryBytes = 32;
constexpr uint32_t kSectionManifest = 1, kSectionPayload = 2;
constexpr uint64_t kAlign = 16;  // where the writer starts each section; the reader does not require it

// The smallest encoding of each manifest record (every string empty, rank 0), for checking a count against
// the bytes that remain before anything is allocated for it.
constexpr uint64_t kMinVariantBytes = 4 + 4 + 4 + 8;      // target, kind + reserved, arch, checksum
constexpr uint64_t kMinProgramBytes = 4 + 4 + 8 + 4 + 4;  // name, μGraph, workspace, variant refs, kernels
constexpr uint64_t kMinKernelBytes = 4 + 6 * 4 + 4 + 4;   // name, grid + block, smem, parameter count
constexpr uint64_t kMinParamBytes = 4 + 4;                // name, role + dtype + rank + reserved
constexpr uint64_t kMinTensorMapBytes = 4 + 4 + 4;         // parameter, rank + reserved, swizzle

// ---- small helpers ----

struct Failure {
  std::string message;
};

[[noreturn]] void fail(std::string message) {
  throw Failure{std::move(message)};
}

std::string num(uint64_t v) {
  return std::to_string(v);
}

std::string hex(uint64_t v, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  size_t n = std::min<size_t>(s.size(), 64);
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > n) out += "...";
  return out;
}

namespace {

uint32_t load_u32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
uint64_t load_u64(const uint8_t* p) {
  return uint64_t{load_u32(p)} | uint64_t{load_u32(p + 4)} << 32;
}

void put_u8(std::vector<uint8_t>& out, uint8_t v) {
  out.push_back(v);
}
void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_str(std::vector<uint8_t>& out, const std::string& s) {
  put_u32(out, static_cast<uint32_t>(s.size()));
  out.insert(out.end(), s.begin(), s.end());
}

constexpr std::array<uint64_t, 256> make_crc_table() {
  std::array<uint64_t, 256> t{};
  for (uint64_t i = 0; i < 256; ++i) {
    uint64_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xc96c5795d7870f42ull : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint64_t, 256> kCrcTable = make_crc_table();

// ---- content rules ----

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Why `s` is not an identifier ([A-Za-z_][A-Za-z0-9_]*, at most kMaxNameBytes), or empty when it is one.
std::string identifier_problem(std::string_view s) {
  if (s.empty()) return "empty name";
  if (s.size() > kMaxNameBytes)
    return "name of " + num(s.size()) + " bytes exceeds the limit " + num(kMaxNameBytes);
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (is_alpha(c) || c == '_' || (i > 0 && is_digit(c))) continue;
    return "name '" + printable(s) +
           "' is not an identifier (letters, digits and _, not starting with a digit)";
  }
  return {};
}

std::string target_name_problem(std::string_view s) {
  if (s.empty()) return "empty target name";
  if (s.size() > kMaxNameBytes)
    return "target name of " + num(s.size()) + " bytes exceeds the limit " + num(kMaxNameBytes);
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (is_alpha(c) || is_digit(c) || (i > 0 && (c == '_' || c == '-' || c == '.'))) continue;
    return "target name '" + printable(s) + "' is not a target file name (letters, digits, _ - .)";
  }
  return {};
}

bool is_decimal(std::string_view s) {
  return !s.empty() && s.size() <= 4 && std::all_of(s.begin(), s.end(), is_digit);
}

// sm_90a, compute_80: the prefix, up to four digits, an optional lowercase letter.
bool is_nvidia_arch(std::string_view s, std::string_view prefix) {
  if (!s.starts_with(prefix)) return false;
  s.remove_prefix(prefix.size());
  if (!s.empty() && s.back() >= 'a' && s.back() <= 'z') s.remove_suffix(1);
  return is_decimal(s);
}

// An AMDGPU target ID: gfx942, gfx90a:xnack-, gfx942:sramecc+:xnack-, gfx10-3-generic.
bool is_amd_target_id(std::string_view s) {
  if (!s.starts_with("gfx")) return false;
  s.remove_prefix(3);
  size_t n = 0;
  while (n < s.size() && (is_digit(s[n]) || (s[n] >= 'a' && s[n] <= 'z') || s[n] == '-')) ++n;
  if (n == 0 || !is_digit(s[0])) return false;
  s.remove_prefix(n);
  while (!s.empty()) {
    if (s[0] != ':') return false;
    s.remove_prefix(1);
    size_t f = 0;
    while (f < s.size() && ((s[f] >= 'a' && s[f] <= 'z') || is_digit(s[f]))) ++f;
    if (f == 0 || f >= s.size() || (s[f] != '+' && s[f] != '-')) return false;
    s.remove_prefix(f + 1);
  }
  return true;
}

std::string arch_problem(VariantKind kind, std::string_view arch) {
  if (arch.size() > kMaxNameBytes)
    return "arch of " + num(arch.size()) + " bytes exceeds the limit " + num(kMaxNameBytes);
  switch (kind) {
    case VariantKind::cubin:
      if (!is_nvidia_arch(arch, "sm_"))
        return "arch '" + printable(arch) + "' of a cubin is not sm_<digits>[letter]";
      return {};
    case VariantKind::ptx:
      if (!is_nvidia_arch(arch, "compute_"))
        return "arch '" + printable(arch) + "' of PTX is not compute_<digits>[letter]";
      return {};
    case VariantKind::hsaco:
      if (!is_amd_target_id(arch))
        return "arch '" + printable(arch) +
               "' of an AMDGPU code object is not a target ID (gfx942:sramecc+:xnack-)";
      return {};
  }
  return "unknown variant kind";
}

// Offset of the first byte of `s` that is not UTF-8 text (malformed, overlong, a surrogate, or a control
// character other than tab, line feed and carriage return), or npos.
size_t bad_text_at(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    uint32_t c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) return i;
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp, min;
    if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return i;
    }
    if (len > s.size() - i) return i;
    for (size_t k = 1; k < len; ++k) {
      uint32_t d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return i;
      cp = cp << 6 | (d & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return std::string_view::npos;
}

bool known(DType d) {
  return d == DType::f16 || d == DType::bf16 || d == DType::f32;
}
bool known(Role r) {
  return r == Role::input || r == Role::output || r == Role::workspace;
}
bool known(VariantKind k) {
  return k == VariantKind::cubin || k == VariantKind::ptx || k == VariantKind::hsaco;
}

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Bytes from the first element to one past the last, or an explanation when the shape or strides are out of
// range.
std::string extent_problem(const Parameter& p, int64_t& bytes) {
  bytes = 0;
  for (size_t i = 0; i < p.shape.size(); ++i) {
    if (p.shape[i] < 0)
      return "negative dimension " + std::to_string(p.shape[i]) + " in shape " + list(p.shape);
    if (p.strides[i] < 0)
      return "negative stride " + std::to_string(p.strides[i]) + " in strides " + list(p.strides);
  }
  if (std::any_of(p.shape.begin(), p.shape.end(), [](int64_t d) { return d == 0; })) return {};
  // last = sum (shape - 1) * stride, each step checked against kMaxTensorBytes (about 2^62), so nothing
  // overflows.
  const int64_t limit = kMaxTensorBytes;
  int64_t last = 0;
  for (size_t i = 0; i < p.shape.size(); ++i) {
    int64_t d = p.shape[i] - 1, s = p.strides[i];
    if (d > 0 && s > (limit - last) / d)
      return "shape " + list(p.shape) + " with strides " + list(p.strides) + " spans more than 2^62 bytes";
    last += d * s;
  }
  int64_t elem = size_bytes(p.dtype);
  if (last + 1 > limit / elem)
    return "shape " + list(p.shape) + " with strides " + list(p.strides) + " spans more than 2^62 bytes";
  bytes = (last + 1) * elem;
  return {};
}

// Numbers the distinct values of key(i) for i in 0..n-1 (equal keys, equal numbers) in O(n log n), so that
// the checks below compare small integers, never strings in a loop over pairs: a hostile file cannot make
// them slow.
template <typename Key>
std::vector<uint32_t> classes(size_t n, Key key) {
  std::vector<uint32_t> order(n), cls(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t c) { return key(a) < key(c); });
  uint32_t c = 0;
  for (size_t k = 0; k < n; ++k) {
    if (k > 0 && key(order[k - 1]) != key(order[k])) ++c;
    cls[order[k]] = c;
  }
  return cls;
}

// The first index whose name repeats an earlier one, and that earlier index.
template <typename T>
std::optional<std::pair<size_t, size_t>> first_repeat(const std::vector<T>& items) {
  std::vector<uint32_t> cls =
      classes(items.size(), [&](uint32_t i) { return std::string_view(items[i].name); });
  std::vector<int64_t> first(items.size(), -1);
  for (size_t i = 0; i < items.size(); ++i) {
    if (first[cls[i]] >= 0) return std::pair{i, static_cast<size_t>(first[cls[i]])};
    first[cls[i]] = static_cast<int64_t>(i);
  }
  return std::nullopt;
}

// A broken rule, and which entity it is about (indices, -1 when not applicable), so that the reader can say
// where that entity starts in the file.
struct Problem {
  int64_t variant = -1, program = -1, kernel = -1, param = -1;
  std::string subject;  // "program 0 (attn), kernel 1 (attn_k1)"
  std::string what;
};

std::string program_subject(const Program& p, size_t i) {
  return "program " + num(i) + " (" + printable(p.name) + ")";
}
std::string kernel_subject(const Kernel& k, size_t i) {
  return "kernel " + num(i) + " (" + printable(k.name) + ")";
}

std::optional<Problem> check_launch(const char* which, const Dim3& d) {
  const uint32_t v[3] = {d.x, d.y, d.z};
  for (int i = 0; i < 3; ++i)
    if (v[i] < 1 || v[i] > kMaxLaunchDim)
      return Problem{.what = std::string(which) + " dimension " + "xyz"[i] + " is " + num(v[i]) +
                             " (must be 1.." + num(kMaxLaunchDim) + ")"};
  return std::nullopt;
}

std::optional<Problem> check_param(const Program& prog, const Parameter& p) {
  auto bad = [](std::string what) { return Problem{.what = std::move(what)}; };
  if (std::string e = identifier_problem(p.name); !e.empty()) return bad(e);
  if (!known(p.role)) return bad("unknown role " + num(static_cast<uint8_t>(p.role)));
  if (!known(p.dtype)) return bad("unknown dtype " + num(static_cast<uint8_t>(p.dtype)));
  if (p.shape.size() > kMaxRank)
    return bad("rank " + num(p.shape.size()) + " exceeds the limit " + num(kMaxRank));
  if (p.strides.size() != p.shape.size())
    return bad("shape has " + num(p.shape.size()) + " dimensions but strides has " + num(p.strides.size()));
  int64_t bytes = 0;
  if (std::string e = extent_problem(p, bytes); !e.empty()) return bad(e);
  if (p.role == Role::workspace && static_cast<uint64_t>(bytes) > prog.workspace_bytes)
    return bad("workspace parameter spans " + num(static_cast<uint64_t>(bytes)) +
               " bytes but the program's workspace is " + num(prog.workspace_bytes) + " bytes");
  return std::nullopt;
}

std::optional<Problem> check_kernel(const Program& prog, const Kernel& k) {
  if (std::string e = identifier_problem(k.name); !e.empty()) return Problem{.what = "entry symbol: " + e};
  if (auto p = check_launch("grid", k.grid)) return p;
  if (auto p = check_launch("block", k.block)) return p;
  if (k.params.size() > kMaxParamsPerKernel)
    return Problem{.what = num(k.params.size()) + " parameters exceed the limit " + num(kMaxParamsPerKernel)};
  auto subject = [&](size_t j) { return "parameter " + num(j) + " (" + printable(k.params[j].name) + ")"; };
  for (size_t j = 0; j < k.params.size(); ++j) {
    if (auto p = check_param(prog, k.params[j])) {
      p->param = static_cast<int64_t>(j);
      p->subject = subject(j);
      return p;
    }
  }
  if (auto r = first_repeat(k.params))
    return Problem{.param = static_cast<int64_t>(r->first),
                   .subject = subject(r->first),
                   .what = "same name as parameter " + num(r->second)};
  if (k.tensor_maps.size() > kMaxTensorMapsPerKernel)
    return Problem{.what = num(k.tensor_maps.size()) + " tensor maps exceed the limit " + num(kMaxTensorMapsPerKernel)};
  for (size_t i = 0; i < k.tensor_maps.size(); ++i) {
    const TensorMap& m = k.tensor_maps[i];
    auto bad = [&](std::string what) { return Problem{.what = "tensor map " + num(i) + ": " + std::move(what)}; };
    if (m.param >= k.params.size()) return bad("parameter " + num(m.param) + " does not exist");
    const Parameter& par = k.params[m.param];
    if (par.role == Role::workspace) return bad("parameter " + num(m.param) + " is the workspace");
    if (par.shape.empty() || par.shape.size() > kMaxTensorMapRank)
      return bad("parameter " + num(m.param) + " has rank " + num(par.shape.size()) + " (must be 1.." +
                 num(kMaxTensorMapRank) + ")");
    if (m.box.size() != par.shape.size())
      return bad("box has " + num(m.box.size()) + " dimensions, parameter " + num(m.param) + " has " +
                 num(par.shape.size()));
    for (uint32_t b : m.box)
      if (b < 1 || b > kMaxTensorMapBox) return bad("box dimension " + num(b) + " (must be 1.." + num(kMaxTensorMapBox) + ")");
    const uint64_t es = size_bytes(par.dtype);
    if (par.strides.back() != 1) return bad("parameter " + num(m.param) + "'s last dimension is not contiguous");
    for (size_t d = 0; d + 1 < par.strides.size(); ++d)
      if (par.strides[d] < 1 || static_cast<uint64_t>(par.strides[d]) * es % 16 != 0)
        return bad("parameter " + num(m.param) + "'s stride " + num(static_cast<uint64_t>(par.strides[d])) +
                   " is not a positive multiple of 16 bytes");
    if (m.box.back() * es % 16 != 0) return bad("box rows of " + num(m.box.back() * es) + " bytes (must be a multiple of 16)");
    if (m.swizzle_bytes != 0 && m.swizzle_bytes != 32 && m.swizzle_bytes != 64 && m.swizzle_bytes != 128)
      return bad("swizzle " + num(m.swizzle_bytes) + " (must be 0, 32, 64 or 128)");
    if (m.swizzle_bytes != 0 && m.box.back() * es > m.swizzle_bytes)
      return bad("box rows of " + num(m.box.back() * es) + " bytes exceed the swizzle's " + num(m.swizzle_bytes));
  }
  return std::nullopt;
}

// `variant_key` numbers the variants by (target, kind, arch).
std::optional<Problem> check_program(const Bundle& b, const Program& prog,
                                     const std::vector<uint32_t>& variant_key) {
  auto bad = [](std::string what) { return Problem{.what = std::move(what)}; };
  if (std::string e = identifier_problem(prog.name); !e.empty()) return bad(e);
  if (prog.mugraph.size() > kMaxMugraphBytes)
    return bad("μGraph text of " + num(prog.mugraph.size()) + " bytes exceeds the limit " +
               num(kMaxMugraphBytes));
  if (size_t at = bad_text_at(prog.mugraph); at != std::string_view::npos)
    return bad("μGraph text is not UTF-8 text: byte " + hex(static_cast<unsigned char>(prog.mugraph[at]), 2) +
               " at position " + num(at));
  if (prog.workspace_bytes > kMaxWorkspaceBytes)
    return bad("workspace of " + num(prog.workspace_bytes) + " bytes exceeds the limit 2^48");
  if (prog.variants.empty()) return bad("lists no variants");
  if (prog.variants.size() > kMaxVariants)
    return bad(num(prog.variants.size()) + " variant references exceed the limit " + num(kMaxVariants));
  std::vector<int64_t> by_key(b.variants.size(), -1);  // the variant this program already lists for a key
  for (uint32_t v : prog.variants) {
    if (v >= b.variants.size())
      return bad("refers to variant " + num(v) + ", but the bundle has " + num(b.variants.size()) +
                 " variants");
    int64_t& seen = by_key[variant_key[v]];
    if (seen == v) return bad("lists variant " + num(v) + " twice");
    if (seen >= 0) {
      const Variant& x = b.variants[v];
      return bad("variants " + num(static_cast<uint64_t>(seen)) + " and " + num(v) + " are both " +
                 printable(x.target) + ", " + std::string(name(x.kind)) + " " + printable(x.arch));
    }
    seen = v;
  }
  if (prog.kernels.empty()) return bad("has no kernels");
  if (prog.kernels.size() > kMaxKernelsPerProgram)
    return bad(num(prog.kernels.size()) + " kernels exceed the limit " + num(kMaxKernelsPerProgram));
  for (size_t k = 0; k < prog.kernels.size(); ++k) {
    const Kernel& ker = prog.kernels[k];
    if (auto p = check_kernel(prog, ker)) {
      std::string subject = kernel_subject(ker, k);
      p->kernel = static_cast<int64_t>(k);
      p->subject = p->subject.empty() ? subject : subject + ", " + p->subject;
      return p;
    }
  }
  if (auto r = first_repeat(prog.kernels))
    return Problem{.kernel = static_cast<int64_t>(r->first),
                   .subject = kernel_subject(prog.kernels[r->first], r->first),
                   .what = "same entry symbol as kernel " + num(r->second)};
  return std::nullopt;
}

std::optional<Problem> check_bundle(const Bundle& b) {
  auto bad = [](std::string what) { return Problem{.subject = "bundle", .what = std::move(what)}; };
  if (b.format_version < 1 || b.format_version > kFormatVersion)
    return bad("format version " + num(b.format_version) + ": this code reads and writes versions 1 to " +
               num(kFormatVersion));
  if (b.format_version < lowest_version(b))
    return bad("format version " + num(b.format_version) + " has no tensor maps (they need version 2)");
  if (b.variants.empty()) return bad("no variants (a bundle holds at least one code object)");
  if (b.variants.size() > kMaxVariants)
    return bad(num(b.variants.size()) + " variants exceed the limit " + num(kMaxVariants));
  if (b.programs.empty()) return bad("no programs");
  if (b.programs.size() > kMaxPrograms)
    return bad(num(b.programs.size()) + " programs exceed the limit " + num(kMaxPrograms));

  for (size_t i = 0; i < b.variants.size(); ++i) {
    const Variant& v = b.variants[i];
    auto bad_variant = [&](std::string what) {
      return Problem{
          .variant = static_cast<int64_t>(i), .subject = describe_variant(b, i), .what = std::move(what)};
    };
    if (std::string e = target_name_problem(v.target); !e.empty()) return bad_variant(e);
    if (!known(v.kind)) return bad_variant("unknown kind " + num(static_cast<uint8_t>(v.kind)));
    if (std::string e = arch_problem(v.kind, v.arch); !e.empty()) return bad_variant(e);
    if (v.payload.empty()) return bad_variant("empty payload");
    if (v.payload.size() > kMaxPayloadBytes)
      return bad_variant("payload of " + num(v.payload.size()) + " bytes exceeds the limit " +
                         num(kMaxPayloadBytes));
  }

  const std::vector<uint32_t> variant_key = classes(b.variants.size(), [&](uint32_t i) {
    const Variant& v = b.variants[i];
    return std::tuple(std::string_view(v.target), v.kind, std::string_view(v.arch));
  });
  const std::vector<uint32_t> target_key =
      classes(b.variants.size(), [&](uint32_t i) { return std::string_view(b.variants[i].target); });
  const std::vector<uint32_t> name_key =
      classes(b.programs.size(), [&](uint32_t i) { return std::string_view(b.programs[i].name); });
  std::map<std::pair<uint32_t, uint32_t>, size_t> serves;  // (program name, target) -> the program serving it

  uint64_t kernels = 0, params = 0;
  for (size_t p = 0; p < b.programs.size(); ++p) {
    const Program& prog = b.programs[p];
    if (auto problem = check_program(b, prog, variant_key)) {
      problem->program = static_cast<int64_t>(p);
      std::string subject = program_subject(prog, p);
      problem->subject = problem->subject.empty() ? subject : subject + ", " + problem->subject;
      return problem;
    }
    kernels += prog.kernels.size();
    for (const Kernel& k : prog.kernels) params += k.params.size();
    // Programs of one name must serve different targets, so that (name, target) picks one program.
    for (uint32_t v : prog.variants) {
      auto [it, fresh] = serves.try_emplace({name_key[p], target_key[v]}, p);
      if (!fresh && it->second != p)
        return Problem{.program = static_cast<int64_t>(p),
                       .subject = program_subject(prog, p),
                       .what = "program " + num(it->second) + " has the same name and also serves target " +
                               printable(b.variants[v].target)};
    }
  }
  if (kernels > kMaxTotalKernels)
    return bad(num(kernels) + " kernels in all exceed the limit " + num(kMaxTotalKernels));
  if (params > kMaxTotalParams)
    return bad(num(params) + " parameters in all exceed the limit " + num(kMaxTotalParams));
  return std::nullopt;
}

// ---- the manifest ----

std::vector<uint8_t> encode_manifest(const Bundle& b, uint32_t version) {
  std::vector<uint8_t> out;
  put_u32(out, static_cast<uint32_t>(b.variants.size()));
  for (const Variant& v : b.variants) {
    put_str(out, v.target);
    put_u8(out, static_cast<uint8_t>(v.kind));
    for (int i = 0; i < 3; ++i) put_u8(out, 0);
    put_str(out, v.arch);
    put_u64(out, crc64(v.payload));
  }
  put_u32(out, static_cast<uint32_t>(b.programs.size()));
  for (const Program& p : b.programs) {
    put_str(out, p.name);
    put_str(out, p.mugraph);
    put_u64(out, p.workspace_bytes);
    put_u32(out, static_cast<uint32_t>(p.variants.size()));
    for (uint32_t v : p.variants) put_u32(out, v);
    put_u32(out, static_cast<uint32_t>(p.kernels.size()));
    for (const Kernel& k : p.kernels) {
      put_str(out, k.name);
      for (uint32_t d : {k.grid.x, k.grid.y, k.grid.z, k.block.x, k.block.y, k.block.z}) put_u32(out, d);
      put_u32(out, k.dynamic_smem_bytes);
      put_u32(out, static_cast<uint32_t>(k.params.size()));
      for (const Parameter& par : k.params) {
        put_str(out, par.name);
        put_u8(out, static_cast<uint8_t>(par.role));
        put_u8(out, static_cast<uint8_t>(par.dtype));
        put_u8(out, static_cast<uint8_t>(par.shape.size()));
        put_u8(out, 0);
        for (int64_t d : par.shape) put_u64(out, static_cast<uint64_t>(d));
        for (int64_t s : par.strides) put_u64(out, static_cast<uint64_t>(s));
      }
      if (version < 2) continue;
      put_u32(out, static_cast<uint32_t>(k.tensor_maps.size()));
      for (const TensorMap& m : k.tensor_maps) {
        put_u32(out, m.param);
        put_u8(out, static_cast<uint8_t>(m.box.size()));
        put_u8(out, 0);
        put_u8(out, 0);
        put_u8(out, 0);
        put_u32(out, m.swizzle_bytes);
        for (uint32_t x : m.box) put_u32(out, x);
      }
    }
  }
  return out;
}

// Where each manifest record starts in the file, for messages about its content.
struct Offsets {
  std::vector<uint64_t> variant, program;
  std::vector<std::vector<uint64_t>> kernel;
  std::vector<std::vector<std::vector<uint64_t>>> param;
};

// Reads the manifest front to back. Every read first checks the bytes that remain; every count is checked
// against its limit and against the bytes that its records need at least, before anything is allocated for
// it.
class ManifestReader {
 public:
  ManifestReader(std::span<const uint8_t> bytes, uint64_t file_offset) : bytes_(bytes), base_(file_offset) {}

  uint64_t offset() const { return base_ + pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }
  void set_context(std::string context) { context_ = std::move(context); }

  uint8_t u8(std::string_view what) { return take(1, what)[0]; }
  uint32_t u32(std::string_view what) { return load_u32(take(4, what)); }
  uint64_t u64(std::string_view what) { return load_u64(take(8, what)); }

  uint32_t count(std::string_view what, uint32_t limit, uint64_t min_item_bytes) {
    uint64_t at = offset();
    uint32_t n = u32(what);
    if (n > limit)
      fail(prefix() + std::string(what) + " " + num(n) + " at offset " + num(at) + " exceeds the limit " +
           num(limit));
    if (n * min_item_bytes > remaining())
      fail("manifest is truncated: " + context_or_empty() + std::string(what) + " " + num(n) + " at offset " +
           num(at) + " needs at least " + num(n * min_item_bytes) + " more bytes, the manifest has " +
           num(remaining()) + " left");
    return n;
  }

  std::string str(std::string_view what, uint32_t limit) {
    uint64_t at = offset();
    uint32_t n = u32(std::string(what) + " length");
    if (n > limit)
      fail(prefix() + std::string(what) + " length " + num(n) + " at offset " + num(at) +
           " exceeds the limit " + num(limit));
    const uint8_t* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), n);
  }

  void reserved(uint64_t n, std::string_view what) {
    uint64_t at = offset();
    const uint8_t* p = take(n, what);
    for (uint64_t i = 0; i < n; ++i)
      if (p[i] != 0)
        fail(prefix() + std::string(what) + " at offset " + num(at + i) + " is " + hex(p[i], 2) +
             " (must be 0)");
  }

  std::string prefix() const { return "manifest: " + context_or_empty(); }

 private:
  std::string context_or_empty() const { return context_.empty() ? std::string() : context_ + ": "; }

  const uint8_t* take(uint64_t n, std::string_view what) {
    if (n > remaining())
      fail("manifest is truncated: " + context_or_empty() + std::string(what) + " needs " + num(n) +
           " bytes at offset " + num(offset()) + ", the manifest ends at offset " +
           num(base_ + bytes_.size()));
    const uint8_t* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }

  std::span<const uint8_t> bytes_;
  uint64_t base_;
  uint64_t pos_ = 0;
  std::string context_;
};

template <typename E>
E decode_enum(ManifestReader& r, std::string_view what, const char* known_codes) {
  uint64_t at = r.offset();
  uint8_t code = r.u8(what);
  auto e = static_cast<E>(code);
  if (!known(e))
    fail(r.prefix() + "unknown " + std::string(what) + " " + num(code) + " at offset " + num(at) + " (" +
         known_codes + ")");
  return e;
}

// A rank byte, at most `limit`.
uint8_t read_rank(ManifestReader& r, uint32_t limit) {
  const uint64_t rank_at = r.offset();
  const uint8_t rank = r.u8("rank");
  if (rank > limit)
    fail(r.prefix() + "rank " + num(rank) + " at offset " + num(rank_at) + " exceeds the limit " + num(limit));
  return rank;
}

void decode_manifest(ManifestReader& r, Bundle& b, Offsets& at, uint32_t version) {
  uint32_t nv = r.count("variant count", kMaxVariants, kMinVariantBytes);
  b.variants.resize(nv);
  for (uint32_t i = 0; i < nv; ++i) {
    Variant& v = b.variants[i];
    r.set_context("variant " + num(i));
    at.variant.push_back(r.offset());
    v.target = r.str("target", kMaxNameBytes);
    v.kind = decode_enum<VariantKind>(r, "variant kind", "1 cubin, 2 ptx, 3 hsaco");
    r.reserved(3, "reserved byte");
    v.arch = r.str("arch", kMaxNameBytes);
    v.checksum = r.u64("checksum");
  }
  r.set_context("");
  uint32_t np = r.count("program count", kMaxPrograms, kMinProgramBytes);
  b.programs.resize(np);
  at.kernel.resize(np);
  at.param.resize(np);
  uint64_t total_kernels = 0, total_params = 0;
  for (uint32_t p = 0; p < np; ++p) {
    Program& prog = b.programs[p];
    r.set_context("program " + num(p));
    at.program.push_back(r.offset());
    prog.name = r.str("name", kMaxNameBytes);
    std::string ctx = "program " + num(p) + " (" + printable(prog.name) + ")";
    r.set_context(ctx);
    prog.mugraph = r.str("μGraph text", kMaxMugraphBytes);
    prog.workspace_bytes = r.u64("workspace size");
    uint32_t nrefs = r.count("variant reference count", kMaxVariants, 4);
    prog.variants.resize(nrefs);
    for (uint32_t& v : prog.variants) v = r.u32("variant reference");
    uint32_t nk = r.count("kernel count", kMaxKernelsPerProgram, kMinKernelBytes);
    if ((total_kernels += nk) > kMaxTotalKernels)
      fail(r.prefix() + "the bundle's kernels exceed the limit " + num(kMaxTotalKernels) + " at offset " +
           num(r.offset() - 4));
    prog.kernels.resize(nk);
    at.param[p].resize(nk);
    for (uint32_t k = 0; k < nk; ++k) {
      Kernel& ker = prog.kernels[k];
      r.set_context(ctx + ", kernel " + num(k));
      at.kernel[p].push_back(r.offset());
      ker.name = r.str("entry symbol", kMaxNameBytes);
      std::string kctx = ctx + ", " + kernel_subject(ker, k);
      r.set_context(kctx);
      for (uint32_t* d : {&ker.grid.x, &ker.grid.y, &ker.grid.z}) *d = r.u32("grid");
      for (uint32_t* d : {&ker.block.x, &ker.block.y, &ker.block.z}) *d = r.u32("block");
      ker.dynamic_smem_bytes = r.u32("dynamic shared memory size");
      uint32_t npar = r.count("parameter count", kMaxParamsPerKernel, kMinParamBytes);
      if ((total_params += npar) > kMaxTotalParams)
        fail(r.prefix() + "the bundle's parameters exceed the limit " + num(kMaxTotalParams) + " at offset " +
             num(r.offset() - 4));
      ker.params.resize(npar);
      for (uint32_t j = 0; j < npar; ++j) {
        Parameter& par = ker.params[j];
        r.set_context(kctx + ", parameter " + num(j));
        at.param[p][k].push_back(r.offset());
        par.name = r.str("name", kMaxNameBytes);
        r.set_context(kctx + ", parameter " + num(j) + " (" + printable(par.name) + ")");
        par.role = decode_enum<Role>(r, "role", "1 input, 2 output, 3 workspace");
        par.dtype = decode_enum<DType>(r, "dtype", "1 f16, 2 bf16, 3 f32");
        uint8_t rank = read_rank(r, kMaxRank);
        r.reserved(1, "reserved byte");
        par.shape.resize(rank);
        par.strides.resize(rank);
        for (int64_t& d : par.shape) d = static_cast<int64_t>(r.u64("shape"));
        for (int64_t& s : par.strides) s = static_cast<int64_t>(r.u64("strides"));
      }
      if (version < 2) continue;  // version 1 kernels have no tensor maps
      r.set_context(kctx);
      uint32_t nmaps = r.count("tensor map count", kMaxTensorMapsPerKernel, kMinTensorMapBytes);
      ker.tensor_maps.resize(nmaps);
      for (uint32_t j = 0; j < nmaps; ++j) {
        TensorMap& m = ker.tensor_maps[j];
        r.set_context(kctx + ", tensor map " + num(j));
        m.param = r.u32("parameter index");
        uint8_t rank = read_rank(r, kMaxTensorMapRank);
        r.reserved(3, "reserved byte");
        m.swizzle_bytes = r.u32("swizzle");
        m.box.resize(rank);
        for (uint32_t& x : m.box) x = r.u32("box");
      }
    }
  }
  r.set_context("");
  if (r.remaining() != 0)
    fail("manifest: " + num(r.remaining()) + " unread bytes at offset " + num(r.offset()) +
         " after the last program");
}

std::string render(const Problem& p, const Offsets* at) {
  std::string where;
  if (at != nullptr) {
    auto idx = [](int64_t i) { return static_cast<size_t>(i); };
    if (p.param >= 0)
      where = " at offset " + num(at->param[idx(p.program)][idx(p.kernel)][idx(p.param)]);
    else if (p.kernel >= 0)
      where = " at offset " + num(at->kernel[idx(p.program)][idx(p.kernel)]);
    else if (p.program >= 0)
      where = " at offset " + num(at->program[idx(p.program)]);
    else if (p.variant >= 0)
      where = " at offset " + num(at->variant[idx(p.variant)]);
  }
  return p.subject + where + ": " + p.what;
}

// ---- the file ----

struct Section {
  uint32_t index;  // in the section table
  uint32_t kind, id;
  uint64_t offset, length, checksum;
};

std::string section_name(const Section& s) {
  return s.kind == kSectionManifest ? "manifest" : "payload of variant " + num(s.id);
}

Bundle decode(std::span<const uint8_t> file) {
  const uint64_t size = file.size();
  const uint8_t* data = file.data();

  // Header. The magic and the version are at the same place in every format version.
  if (size > 0 && std::memcmp(data, kMagic.data(), std::min<uint64_t>(size, kMagic.size())) != 0)
    fail("not a morgana bundle (the file does not start with the bundle magic bytes)");
  if (size >= 12) {
    uint32_t version = load_u32(data + 8);
    if (version == 0) fail("bundle format version 0 is not valid");
    if (version > kFormatVersion)
      fail("bundle format version " + num(version) + " is newer than this runtime (supports " +
           num(kFormatVersion) + ")");
  }
  if (size < kHeaderBytes)
    fail("truncated: header needs " + num(kHeaderBytes) + " bytes at offset 0, file has " + num(size));
  const uint32_t section_count = load_u32(data + 12);
  const uint64_t file_bytes = load_u64(data + 16);
  if (uint32_t flags = load_u32(data + 24); flags != 0)
    fail("header: flags " + hex(flags, 8) + " at offset 24 are not defined in format version " +
         num(kFormatVersion));
  if (uint32_t reserved = load_u32(data + 28); reserved != 0)
    fail("header: reserved field at offset 28 is " + hex(reserved, 8) + " (must be 0)");
  if (file_bytes > size)
    fail("truncated: header says the file has " + num(file_bytes) + " bytes, it has " + num(size));
  if (file_bytes < size)
    fail(num(size - file_bytes) + " bytes after the end of the bundle (header says the file has " +
         num(file_bytes) + " bytes, it has " + num(size) + ")");
  if (section_count < 2 || section_count > kMaxSections)
    fail("header: section count " + num(section_count) + " at offset 12 is out of range (2.." +
         num(kMaxSections) + ")");
  const uint64_t table_end = kHeaderBytes + uint64_t{section_count} * kSectionEntryBytes;
  if (table_end > size)
    fail("truncated: section table needs " + num(table_end - kHeaderBytes) + " bytes at offset " +
         num(kHeaderBytes) + ", file has " + num(size));

  // Section table: known kinds, inside the file after the table, no overlap, one manifest, one payload per
  // id.
  std::vector<Section> sections;
  sections.reserve(section_count);
  const Section* manifest = nullptr;
  for (uint32_t i = 0; i < section_count; ++i) {
    const uint8_t* e = data + kHeaderBytes + uint64_t{i} * kSectionEntryBytes;
    Section s{i, load_u32(e), load_u32(e + 4), load_u64(e + 8), load_u64(e + 16), load_u64(e + 24)};
    const std::string at =
        "section " + num(i) + " at offset " + num(kHeaderBytes + uint64_t{i} * kSectionEntryBytes);
    if (s.kind != kSectionManifest && s.kind != kSectionPayload)
      fail(at + ": unknown kind " + num(s.kind) + " (1 manifest, 2 payload)");
    if (s.kind == kSectionManifest && s.id != 0) fail(at + " (manifest): id " + num(s.id) + " (must be 0)");
    if (s.kind == kSectionPayload && s.id >= kMaxVariants)
      fail(at + ": payload of variant " + num(s.id) + ", beyond the limit of " + num(kMaxVariants) +
           " variants");
    std::string name = section_name(s);
    if (s.offset < table_end)
      fail("section " + num(i) + " (" + name + ") starts at offset " + num(s.offset) +
           ", inside the header and section table (which end at offset " + num(table_end) + ")");
    if (s.offset > size || s.length > size - s.offset)
      fail("truncated: " + name + " needs " + num(s.length) + " bytes at offset " + num(s.offset) +
           ", file has " + num(size));
    uint64_t limit = s.kind == kSectionManifest ? kMaxManifestBytes : kMaxPayloadBytes;
    if (s.length > limit)
      fail("section " + num(i) + " (" + name + "): " + num(s.length) + " bytes exceed the limit " +
           num(limit));
    for (const Section& o : sections)
      if (o.kind == s.kind && o.id == s.id)
        fail("sections " + num(o.index) + " and " + num(i) + " are both the " + name);
    sections.push_back(s);
    if (s.kind == kSectionManifest) manifest = &sections.back();
  }
  if (manifest == nullptr) fail("no manifest section in the section table");
  const Section manifest_section = *manifest;

  std::vector<Section> by_offset = sections;
  std::sort(by_offset.begin(), by_offset.end(), [](const Section& a, const Section& c) {
    return a.offset != c.offset ? a.offset < c.offset : a.length < c.length;
  });
  // Every byte outside the header, the table and the sections is padding and must be 0, so that a flipped bit
  // anywhere in the file is caught by a check or a checksum.
  auto check_padding = [&](uint64_t from, uint64_t to) {
    for (uint64_t k = from; k < to; ++k)
      if (data[k] != 0)
        fail("padding byte at offset " + num(k) + " is " + hex(data[k], 2) +
             " (bytes between sections must be 0)");
  };
  uint64_t end = table_end;
  for (size_t k = 0; k < by_offset.size(); ++k) {
    const Section& s = by_offset[k];
    if (k > 0 && s.offset < end) {
      const Section& prev = by_offset[k - 1];
      fail("sections " + num(prev.index) + " (" + section_name(prev) + ") [" + num(prev.offset) + ", " +
           num(end) + ") and " + num(s.index) + " (" + section_name(s) + ") [" + num(s.offset) + ", " +
           num(s.offset + s.length) + ") overlap");
    }
    check_padding(end, s.offset);
    end = s.offset + s.length;
  }
  check_padding(end, size);

  // Manifest.
  std::span<const uint8_t> manifest_bytes = file.subspan(manifest_section.offset, manifest_section.length);
  if (crc64(manifest_bytes) != manifest_section.checksum)
    fail("manifest: checksum mismatch over bytes [" + num(manifest_section.offset) + ", " +
         num(manifest_section.offset + manifest_section.length) + ")");
  Bundle b;
  Offsets at;
  ManifestReader reader(manifest_bytes, manifest_section.offset);
  b.format_version = load_u32(data + 8);
  decode_manifest(reader, b, at, b.format_version);

  // Payloads: exactly one section per variant.
  const size_t nv = b.variants.size();
  std::vector<const Section*> payload(nv, nullptr);
  for (const Section& s : sections) {
    if (s.kind != kSectionPayload) continue;
    if (s.id >= nv)
      fail("section " + num(s.index) + " holds the payload of variant " + num(s.id) +
           ", but the manifest lists " + num(nv) + " variants");
    payload[s.id] = &s;
  }
  for (size_t i = 0; i < nv; ++i) {
    const Section* s = payload[i];
    if (s == nullptr) fail(describe_variant(b, i) + ": no payload section");
    // The manifest's checksum ties the payload to its variant; the section table's alone would not notice two
    // payload sections whose ids were swapped.
    std::span<const uint8_t> bytes = file.subspan(s->offset, s->length);
    const uint64_t expected = b.variants[i].checksum, actual = crc64(bytes);
    if (actual != expected || s->checksum != expected)
      fail(describe_variant(b, i) + ": checksum mismatch over bytes [" + num(s->offset) + ", " +
           num(s->offset + s->length) + "): manifest " + hex(expected, 16) + ", section table " +
           hex(s->checksum, 16) + ", payload " + hex(actual, 16));
    b.variants[i].payload.assign(bytes.begin(), bytes.end());
  }

  if (auto problem = check_bundle(b)) fail(render(*problem, &at));
  return b;
}

std::string errno_text(int err) {
  return std::generic_category().message(err);
}

}  // namespace

std::string_view name(DType d) {
  switch (d) {
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::f32:
      return "f32";
  }
  return "?";
}

std::string_view name(Role r) {
  switch (r) {
    case Role::input:
      return "input";
    case Role::output:
      return "output";
    case Role::workspace:
      return "workspace";
  }
  return "?";
}

std::string_view name(VariantKind k) {
  switch (k) {
    case VariantKind::cubin:
      return "cubin";
    case VariantKind::ptx:
      return "ptx";
    case VariantKind::hsaco:
      return "hsaco";
  }
  return "?";
}

uint32_t size_bytes(DType d) {
  return d == DType::f32 ? 4 : 2;
}

uint64_t crc64(std::span<const uint8_t> bytes) {
  uint64_t c = ~uint64_t{0};
  for (uint8_t byte : bytes) c = kCrcTable[(c ^ byte) & 0xff] ^ (c >> 8);
  return ~c;
}

std::optional<std::string> validate(const Bundle& b) {
  if (auto p = check_bundle(b)) return render(*p, nullptr);
  return std::nullopt;
}

std::string describe_variant(const Bundle& b, size_t index) {
  const Variant& v = b.variants.at(index);
  std::string kind = known(v.kind) ? std::string(name(v.kind)) : "kind " + num(static_cast<uint8_t>(v.kind));
  return "variant " + num(index) + " (" + printable(v.target) + ", " + kind + " " + printable(v.arch) + ")";
}

uint32_t lowest_version(const Bundle& b) {
  for (const Program& p : b.programs)
    for (const Kernel& k : p.kernels)
      if (!k.tensor_maps.empty()) return 2;
  return 1;
}

std::vector<uint8_t> write_bundle(const Bundle& b) {
  if (auto p = check_bundle(b)) throw std::invalid_argument("cannot write bundle: " + render(*p, nullptr));
  const uint32_t version = lowest_version(b);
  const std::vector<uint8_t> manifest = encode_manifest(b, version);
  if (manifest.size() > kMaxManifestBytes)
    throw std::invalid_argument("cannot write bundle: manifest of " + num(manifest.size()) +
                                " bytes exceeds the limit " + num(kMaxManifestBytes));
  auto align = [](uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; };
  const uint32_t section_count = static_cast<uint32_t>(1 + b.variants.size());
  uint64_t size = align(kHeaderBytes + uint64_t{section_count} * kSectionEntryBytes);
  std::vector<uint64_t> offsets;  // manifest, then each variant's payload
  offsets.push_back(size);
  size = align(size + manifest.size());
  for (const Variant& v : b.variants) {
    offsets.push_back(size);
    size = align(size + v.payload.size());
  }
  // No padding after the last section (check_bundle made sure there is a variant): the file ends with its
  // data.
  size = offsets.back() + b.variants.back().payload.size();

  // Filled in place rather than appended: GCC 12 warns falsely (-Wstringop-overflow) on vector::insert here.
  std::vector<uint8_t> out(size, 0);
  uint8_t* at = out.data();
  auto u32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) *at++ = static_cast<uint8_t>(v >> (8 * i));
  };
  auto u64 = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) *at++ = static_cast<uint8_t>(v >> (8 * i));
  };
  at = std::copy(kMagic.begin(), kMagic.end(), at);
  u32(version);
  u32(section_count);
  u64(size);
  u32(0);  // flags
  u32(0);  // reserved
  auto section = [&](uint32_t kind, uint32_t id, uint64_t offset, std::span<const uint8_t> bytes) {
    u32(kind);
    u32(id);
    u64(offset);
    u64(bytes.size());
    u64(crc64(bytes));
    std::copy(bytes.begin(), bytes.end(), out.begin() + static_cast<std::ptrdiff_t>(offset));
  };
  section(kSectionManifest, 0, offsets[0], manifest);
  for (size_t i = 0; i < b.variants.size(); ++i)
    section(kSectionPayload, static_cast<uint32_t>(i), offsets[i + 1], b.variants[i].payload);
  return out;
}

Result read_bundle(std::span<const uint8_t> bytes) {
  Result r;
  try {
    r.bundle = decode(bytes);
  } catch (const Failure& f) {
    r.error = f.message;
  } catch (const std::bad_alloc&) {
    r.error = "out of memory while reading the bundle";
  } catch (const std::exception& e) {
    r.error = std::string("internal error in the bundle reader: ") + e.what();
  } catch (...) {
    r.error = "internal error in the bundle reader";
  }
  if (!r.error.empty()) r.bundle.reset();
  return r;
}

Status write_bundle_file(const std::string& path, const Bundle& b) {
  std::vector<uint8_t> bytes;
  try {
    bytes = write_bundle(b);
  } catch (const std::exception& e) {
    return Status{path + ": " + e.what()};
  }
  // A name no other writer in this process or another one uses; O_EXCL makes sure of it.
  static std::atomic<unsigned> counter{0};
  const std::string tmp = path + ".tmp-" + num(static_cast<uint64_t>(getpid())) + "-" + num(counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status{path + ": cannot create " + tmp + ": " + errno_text(errno)};
  auto give_up = [&](const std::string& what) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Status{path + ": " + what + ": " + errno_text(err)};
  };
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return give_up("cannot write " + tmp);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return give_up("cannot flush " + tmp);
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Status{path + ": cannot close " + tmp + ": " + errno_text(err)};
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Status{path + ": cannot rename " + tmp + ": " + errno_text(err)};
  }
  return Status{};
}

Result read_bundle_file(const std::string& path) {
  Result r;
  try {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      r.io_error = true;
      r.error = path + ": cannot open: " + errno_text(errno);
      return r;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      r.io_error = true;
      r.error = path + ": not a regular file";
      ::close(fd);
      return r;
    }
    if (static_cast<uint64_t>(st.st_size) > kMaxFileBytes) {
      r.error = path + ": " + num(static_cast<uint64_t>(st.st_size)) +
                " bytes exceed the bundle size limit " + num(kMaxFileBytes);
      ::close(fd);
      return r;
    }
    std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        r.io_error = true;
        r.error = path + ": cannot read: " + errno_text(errno);
        ::close(fd);
        return r;
      }
      if (n == 0) break;  // the file shrank while we read it; the reader reports the truncation
      done += static_cast<size_t>(n);
    }
    ::close(fd);
    bytes.resize(done);
    r = read_bundle(bytes);
    if (!r.ok()) r.error = path + ": " + r.error;
  } catch (const std::bad_alloc&) {
    r.bundle.reset();
    r.error = path + ": out of memory while reading the bundle";
  } catch (const std::exception& e) {
    r.bundle.reset();
    r.error = path + ": " + e.what();
  }
  return r;
}

}  // namespace morgana::bundle
