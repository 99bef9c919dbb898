// Loading of hardware description files (see target.h and docs/targets.md). The schema is one table per
// section below; the same tables drive unknown-key detection, type checks, required-key checks, range checks
// and the assignment into Target, so adding a key is one line here plus the field in target.h. Cross-key
// rules (opt-in shared memory within the per-SM amount, arch spelling per vendor, ...) follow in validate_*.
//
// Inheritance is resolved without copying TOML nodes (TOML++ drops source positions on copy): every file of
// the chain stays parsed, and the merge keeps pointers to the nodes that win, so each error can name the
// file, line and column where the offending value was written, including inside a base file.
#include "targets/target.h"

#include <toml++/toml.h>
#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <span>
#include <sstream>
#include <type_traits>
#include <utility>
#include <variant>

#include "ir/diagnostic.h"
#include "ir/graph.h"

namespace morgana::targets {

namespace fs = std::filesystem;

namespace {

// -----------------------------------------------------------------------------------------------------------
// Vocabularies. These are names, not hardware numbers: which of them a GPU supports is stated in its file.

constexpr std::string_view kVendors[] = {"nvidia", "amd"};
constexpr std::string_view kElementTypes[] = {"f16", "bf16",     "f32",      "tf32", "xf32",
                                              "f64", "fp8_e4m3", "fp8_e5m2", "i8",   "i32"};
constexpr std::string_view kScopes[] = {"warp", "warpgroup", "wave"};
constexpr std::string_view kOperandSources[] = {"registers", "shared"};

// How each vendor spells its architectures and which matrix scopes its instructions can have.
struct VendorRule {
  std::string_view vendor;
  std::string_view arch_prefix;
  std::string_view arch_example;
  std::vector<std::string_view> scopes;
};
const VendorRule kVendorRules[] = {
    {"nvidia", "sm_", "sm_90a", {"warp", "warpgroup"}},
    {"amd", "gfx", "gfx942", {"wave"}},
};

// -----------------------------------------------------------------------------------------------------------
// Schema.

enum class Need { required, optional };
enum class Range { any, positive, non_negative, fraction };  // fraction: 0 < x <= 1

// Upper bounds on every number, whatever its key: far above any GPU, far below what the cost model's and the
// lowering's products of them (SMs x blocks x threads x bytes) could overflow. A count (SMs, threads, registers,
// bytes of shared memory, instruction shapes, lane layout entries) stays below 2^20; a key named *_bytes (DRAM, L2)
// below 2^48 (256 TiB); a rate, a time or a fraction is a finite number below 10^12 (issue 17: `sms = 2^63 - 1`
// priced a kernel at 6e15 us, and NaN passed as a latency).
constexpr int64_t kMaxCount = int64_t{1} << 20;
constexpr int64_t kMaxBytes = int64_t{1} << 48;
constexpr double kMaxReal = 1e12;

// Where a key's value lands in its owner (Target for sections, MatrixInstr for [[matrix]] entries). The
// field's C++ type decides the TOML type the key must have.
template <class Owner>
using FieldRef = std::variant<int64_t& (*)(Owner&), double& (*)(Owner&), std::string& (*)(Owner&),
                              bool& (*)(Owner&), std::vector<std::string>& (*)(Owner&),
                              std::vector<int64_t>& (*)(Owner&)>;

template <class Owner>
struct KeySpec {
  std::string_view key;
  Need need;
  Range range;
  std::span<const std::string_view> choices;  // allowed strings (or list elements); empty: free text
  FieldRef<Owner> field;
};

using NoChoices = std::span<const std::string_view>;

// One line per key; the lambda names the field, whose type picks the FieldRef alternative.
// clang-format off
#define MG_KEY(section, key, need, range, choices)        \
  KeySpec<Target>{#key, Need::need, Range::range, choices, \
                  +[](Target& t) -> auto& { return t.section.key; }}
#define MG_MATRIX_KEY(key, need, range, choices)                \
  KeySpec<MatrixInstr>{#key, Need::need, Range::range, choices, \
                       +[](MatrixInstr& m) -> auto& { return m.key; }}
// clang-format on

const KeySpec<Target> kIdentityKeys[] = {
    MG_KEY(identity, name, required, any, NoChoices()),
    MG_KEY(identity, vendor, required, any, kVendors),
    MG_KEY(identity, arch, required, any, NoChoices()),
    MG_KEY(identity, family, required, any, NoChoices()),
    MG_KEY(identity, description, optional, any, NoChoices()),
};
const KeySpec<Target> kExecutionKeys[] = {
    MG_KEY(execution, sms, required, positive, NoChoices()),
    MG_KEY(execution, warp_size, required, positive, NoChoices()),
    MG_KEY(execution, max_threads_per_block, required, positive, NoChoices()),
    MG_KEY(execution, max_threads_per_sm, required, positive, NoChoices()),
    MG_KEY(execution, max_blocks_per_sm, required, positive, NoChoices()),
};
const KeySpec<Target> kMemoryKeys[] = {
    MG_KEY(memory, smem_per_block_default, required, positive, NoChoices()),
    MG_KEY(memory, smem_per_block_optin, required, positive, NoChoices()),
    MG_KEY(memory, smem_per_sm, required, positive, NoChoices()),
    MG_KEY(memory, smem_reserved_per_block, required, non_negative, NoChoices()),
    MG_KEY(memory, l2_bytes, required, positive, NoChoices()),
    MG_KEY(memory, l2_domains, optional, positive, NoChoices()),
    MG_KEY(memory, mall_bytes, optional, non_negative, NoChoices()),
    MG_KEY(memory, dram_bandwidth_gbps, required, positive, NoChoices()),
    MG_KEY(memory, dram_bytes, required, positive, NoChoices()),
    MG_KEY(memory, dram_sector_bytes, required, positive, NoChoices()),
    MG_KEY(memory, l2_line_bytes, optional, non_negative, NoChoices()),
};
const KeySpec<Target> kRegisterKeys[] = {
    MG_KEY(registers, regs_per_sm, required, positive, NoChoices()),
    MG_KEY(registers, regs_per_block, required, positive, NoChoices()),
    MG_KEY(registers, max_regs_per_thread, required, positive, NoChoices()),
};
const KeySpec<Target> kAsyncKeys[] = {
    MG_KEY(async, cp_async, required, any, NoChoices()),
    MG_KEY(async, tma, required, any, NoChoices()),
    MG_KEY(async, wgmma, required, any, NoChoices()),
    MG_KEY(async, clusters, required, any, NoChoices()),
    MG_KEY(async, max_stages, optional, positive, NoChoices()),
    MG_KEY(async, in_flight_bytes, optional, non_negative, NoChoices()),
};
const KeySpec<Target> kPeakKeys[] = {
    MG_KEY(peak, f16_tensor, required, positive, NoChoices()),
    MG_KEY(peak, bf16_tensor, required, positive, NoChoices()),
    MG_KEY(peak, tf32_tensor, optional, positive, NoChoices()),
    MG_KEY(peak, fp8_tensor, optional, positive, NoChoices()),
    MG_KEY(peak, f32_vector, required, positive, NoChoices()),
    MG_KEY(peak, f64_vector, optional, positive, NoChoices()),
};
const KeySpec<Target> kCostKeys[] = {
    MG_KEY(cost, launch_overhead_us, required, positive, NoChoices()),
    MG_KEY(cost, barrier_ns, required, positive, NoChoices()),
    MG_KEY(cost, dram_efficiency, required, fraction, NoChoices()),
    MG_KEY(cost, tensor_efficiency, required, fraction, NoChoices()),
    MG_KEY(cost, l2_bandwidth_gbps, required, positive, NoChoices()),
    MG_KEY(cost, smem_bandwidth_gbps_per_sm, required, positive, NoChoices()),
    MG_KEY(cost, dram_short_run_efficiency, required, fraction, NoChoices()),
    MG_KEY(cost, iteration_latency_us, required, non_negative, NoChoices()),
    MG_KEY(cost, pass_element_ns, optional, non_negative, NoChoices()),
    MG_KEY(cost, overlap_miss, optional, fraction, NoChoices()),
    MG_KEY(cost, vector_efficiency, optional, fraction, NoChoices()),
    MG_KEY(cost, warp_stream_gbps, optional, non_negative, NoChoices()),
    MG_KEY(cost, partial_line_request_ns, optional, non_negative, NoChoices()),
    MG_KEY(cost, block_dispatch_ns, optional, non_negative, NoChoices()),
    MG_KEY(cost, chain_shown_at, optional, fraction, NoChoices()),
    MG_KEY(cost, row_reduction_ns, optional, non_negative, NoChoices()),
};
const KeySpec<MatrixInstr> kMatrixKeys[] = {
    MG_MATRIX_KEY(op, required, any, NoChoices()),
    MG_MATRIX_KEY(m, required, positive, NoChoices()),
    MG_MATRIX_KEY(n, required, positive, NoChoices()),
    MG_MATRIX_KEY(n_max, optional, positive, NoChoices()),
    MG_MATRIX_KEY(n_step, optional, positive, NoChoices()),
    MG_MATRIX_KEY(k, required, positive, NoChoices()),
    MG_MATRIX_KEY(ab_types, required, any, kElementTypes),
    MG_MATRIX_KEY(acc, required, any, kElementTypes),
    MG_MATRIX_KEY(scope, required, any, kScopes),
    MG_MATRIX_KEY(a_from, required, any, kOperandSources),
    MG_MATRIX_KEY(b_from, required, any, kOperandSources),
    MG_MATRIX_KEY(a_rows, optional, any, NoChoices()),
    MG_MATRIX_KEY(a_cols, optional, any, NoChoices()),
    MG_MATRIX_KEY(b_rows, optional, any, NoChoices()),
    MG_MATRIX_KEY(b_cols, optional, any, NoChoices()),
    MG_MATRIX_KEY(c_rows, optional, any, NoChoices()),
    MG_MATRIX_KEY(c_cols, optional, any, NoChoices()),
};

#undef MG_KEY
#undef MG_MATRIX_KEY

struct SectionSpec {
  std::string_view name;
  std::span<const KeySpec<Target>> keys;
};
const SectionSpec kSections[] = {
    {"identity", kIdentityKeys},  {"execution", kExecutionKeys}, {"memory", kMemoryKeys},
    {"registers", kRegisterKeys}, {"async", kAsyncKeys},         {"peak", kPeakKeys},
    {"cost", kCostKeys},
};
constexpr std::string_view kMatrixSection = "matrix";
constexpr std::string_view kBaseKey = "base";

// -----------------------------------------------------------------------------------------------------------
// Small helpers.

SourceLoc loc_of(const toml::source_region& r) {
  return SourceLoc{r.path ? *r.path : std::string(), r.begin.line, r.begin.column};
}
SourceLoc loc_of(const toml::node& n) {
  return loc_of(n.source());
}
SourceLoc loc_of(const toml::key& k) {
  return loc_of(k.source());
}

std::string display(const fs::path& p) {
  return p.lexically_normal().generic_string();
}

// The candidate closest to `word` if it is within two edits (a likely typo), else nullopt.
template <class Words>
std::optional<std::string> closest(std::string_view word, const Words& candidates) {
  std::optional<std::string> best;
  size_t best_d = 3;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = std::string(c);
  }
  return best;
}

std::string join(std::span<const std::string_view> words) {
  std::string s;
  for (auto w : words) s += (s.empty() ? "" : ", ") + std::string(w);
  return s;
}

// Entries of a table in the order they were written, so the first error reported is the first in the file.
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& t) {
  std::vector<std::pair<const toml::key*, const toml::node*>> v;
  for (auto&& [k, n] : t) v.emplace_back(&k, &n);
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    auto pa = a.first->source().begin, pb = b.first->source().begin;
    return std::pair(pa.line, pa.column) < std::pair(pb.line, pb.column);
  });
  return v;
}

std::string_view toml_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a floating-point number";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date or time";
  }
}

[[noreturn]] void fail(std::string message, SourceLoc loc) {
  throw UserError(std::move(message), std::move(loc));
}

// The C++ type a FieldRef alternative writes to.
template <class Owner, class Getter>
using FieldOf = std::remove_reference_t<std::invoke_result_t<Getter, Owner&>>;

std::string section_label(std::string_view section) {
  return section == kMatrixSection ? "[[matrix]]" : "[" + std::string(section) + "]";
}

// Rejects a value whose TOML type does not fit the field (the element types of a string list included).
template <class Owner>
void check_type(const KeySpec<Owner>& spec, const toml::node& node, std::string_view section) {
  auto where = "'" + std::string(spec.key) + "' in " + section_label(section);
  std::visit(
      [&](auto get) {
        using F = FieldOf<Owner, decltype(get)>;
        const char* want = nullptr;
        if constexpr (std::is_same_v<F, int64_t>) {
          if (!node.is_integer()) want = "an integer";
        } else if constexpr (std::is_same_v<F, double>) {
          if (!node.is_number()) want = "a number";
        } else if constexpr (std::is_same_v<F, std::string>) {
          if (!node.is_string()) want = "a string";
        } else if constexpr (std::is_same_v<F, bool>) {
          if (!node.is_boolean()) want = "a boolean";
        } else {
          // A list: of integers (lane layouts) or of strings.
          constexpr bool ints = std::is_same_v<F, std::vector<int64_t>>;
          const char* list = ints ? "an array of integers" : "an array of strings";
          const toml::array* a = node.as_array();
          if (!a) {
            want = list;
          } else {
            for (const toml::node& e : *a)
              if (ints ? !e.is_integer() : !e.is_string())
                fail(where + " must be " + list + "; this element is " + std::string(toml_type_name(e)), loc_of(e));
          }
        }
        if (want)
          fail(where + " must be " + want + ", not " + std::string(toml_type_name(node)), loc_of(node));
      },
      spec.field);
}

template <class Owner>
const KeySpec<Owner>* find_key(std::span<const KeySpec<Owner>> keys, std::string_view key) {
  for (const auto& k : keys)
    if (k.key == key) return &k;
  return nullptr;
}

// Unknown keys and wrong types in one table of one file.
template <class Owner>
void check_table(const toml::table& table, std::string_view section, std::span<const KeySpec<Owner>> keys) {
  for (auto [key, node] : in_file_order(table)) {
    const KeySpec<Owner>* spec = find_key(keys, key->str());
    if (!spec) {
      std::vector<std::string_view> names;
      for (const auto& k : keys) names.push_back(k.key);
      std::string msg = "unknown key '" + std::string(key->str()) + "' in " + section_label(section);
      if (auto hint = closest(key->str(), names)) msg += "; did you mean '" + *hint + "'?";
      fail(msg, loc_of(*key));
    }
    check_type(*spec, *node, section);
  }
}

const SectionSpec* find_section(std::string_view name) {
  for (const auto& s : kSections)
    if (s.name == name) return &s;
  return nullptr;
}

// One file of an inheritance chain, parsed and checked on its own: TOML syntax, unknown sections and keys,
// types, and its own name.
struct Layer {
  std::string file;  // as shown in diagnostics
  toml::table root;
};

Layer parse_layer(const fs::path& path) {
  Layer layer{display(path), {}};
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    fail("cannot read target file '" + layer.file + "'", SourceLoc{layer.file});
  try {
    layer.root = toml::parse_file(layer.file);
  } catch (const toml::parse_error& e) {
    SourceLoc loc = loc_of(e.source());
    if (loc.file.empty()) loc.file = layer.file;
    fail("TOML syntax error: " + std::string(e.description()), loc);
  }

  for (auto [key, node] : in_file_order(layer.root)) {
    std::string_view name = key->str();
    if (name == kBaseKey) {
      if (!node->is_string() || node->as_string()->get().empty())
        fail("'base' must be a non-empty string naming the base target", loc_of(*node));
    } else if (const SectionSpec* s = find_section(name)) {
      if (!node->is_table())
        fail("'" + std::string(name) + "' must be a table ([" + std::string(name) + "])", loc_of(*node));
      check_table<Target>(*node->as_table(), name, s->keys);
    } else if (name == kMatrixSection) {
      const toml::array* a = node->as_array();
      if (!a || (!a->empty() && !a->is_array_of_tables()))  // `matrix = []` clears an inherited list
        fail("'matrix' must be an array of tables, written as [[matrix]] sections", loc_of(*node));
      for (const toml::node& e : *a) check_table<MatrixInstr>(*e.as_table(), kMatrixSection, kMatrixKeys);
    } else {
      std::vector<std::string_view> names{kBaseKey, kMatrixSection};
      for (const auto& section : kSections) names.push_back(section.name);
      std::string msg = node->is_table() ? "unknown section [" + std::string(name) + "]"
                                         : "unknown top-level key '" + std::string(name) + "'";
      if (auto hint = closest(name, names)) msg += "; did you mean '" + *hint + "'?";
      fail(msg, loc_of(*key));
    }
  }

  // The name is never inherited: each file states its own, and it is the file's stem so that a target can be
  // found by name without loading every file.
  std::string stem = path.stem().string();
  const toml::node* name = layer.root.at_path("identity.name").node();
  if (!name) {
    const toml::node* identity = layer.root.get("identity");
    fail("missing required key 'name' in [identity] (every file states its own name; it is never inherited)",
         identity ? loc_of(*identity) : SourceLoc{layer.file, 1, 1});
  }
  if (name->as_string()->get() != stem)
    fail("name '" + name->as_string()->get() + "' does not match the file name '" + path.filename().string() +
             "'; it must be '" + stem + "'",
         loc_of(*name));
  return layer;
}

// Whether `path` lies inside the folder `root` (both made canonical, symbolic links resolved).
bool inside(const fs::path& path, const fs::path& root) {
  const fs::path p = fs::weakly_canonical(path), r = fs::weakly_canonical(root);
  auto [end, _] = std::mismatch(r.begin(), r.end(), p.begin(), p.end());
  return end == r.end();
}

// Parses `file` and its base chain, nearest first; detects missing bases, cycles and bases outside `root` (a target
// file names a target of the same folder, not any file of the machine: issue 17 read a `base` from an absolute path).
std::vector<Layer> load_chain(const fs::path& file, const fs::path& root) {
  std::vector<Layer> chain;
  std::vector<fs::path> seen;  // canonical paths, to recognise a file reached twice
  fs::path path = file;
  for (;;) {
    chain.push_back(parse_layer(path));
    seen.push_back(fs::weakly_canonical(path));
    const toml::node* base = chain.back().root.get(kBaseKey);
    if (!base) break;
    // A bare name is a sibling file; a name with '/' is a path relative to this file's directory.
    fs::path next = path.parent_path() / base->as_string()->get();
    if (next.extension() != ".toml") next += ".toml";
    if (!inside(next, root))
      fail("base '" + base->as_string()->get() + "' lies outside the targets folder " + display(root) +
               " (a base names a target file inside it)",
           loc_of(*base));
    std::error_code ec;
    if (!fs::is_regular_file(next, ec))
      fail("base '" + base->as_string()->get() + "' not found: no file " + display(next), loc_of(*base));
    fs::path canon = fs::weakly_canonical(next);
    if (auto it = std::find(seen.begin(), seen.end(), canon); it != seen.end()) {
      std::string cycle;
      for (auto i = it - seen.begin(); i < static_cast<std::ptrdiff_t>(chain.size()); ++i)
        cycle += chain[i].file + " -> ";
      fail("inheritance cycle: " + cycle + display(next), loc_of(*base));
    }
    path = next;
  }
  return chain;
}

// The winning node of every key after inheritance: a child's key replaces its base's key; [[matrix]] is
// replaced as a whole.
struct Merged {
  std::map<std::string_view, std::map<std::string, const toml::node*, std::less<>>> values;
  std::map<std::string_view, SourceLoc> headers;  // most derived [section] header, for "missing key" errors
  const toml::array* matrix = nullptr;
  std::string leaf;

  const toml::node* get(std::string_view section, std::string_view key) const {
    auto s = values.find(section);
    if (s == values.end()) return nullptr;
    auto k = s->second.find(key);
    return k == s->second.end() ? nullptr : k->second;
  }
  SourceLoc loc(std::string_view section, std::string_view key) const { return loc_of(*get(section, key)); }
};

Merged merge(const std::vector<Layer>& chain) {
  Merged m;
  m.leaf = chain.front().file;
  for (auto layer = chain.rbegin(); layer != chain.rend(); ++layer) {
    for (auto&& [key, node] : layer->root) {
      if (const SectionSpec* s = find_section(key.str())) {
        m.headers[s->name] = loc_of(node);
        for (auto&& [k, v] : *node.as_table()) m.values[s->name][std::string(k.str())] = &v;
      } else if (key.str() == kMatrixSection) {
        m.matrix = node.as_array();
      }
    }
  }
  return m;
}

// Range and vocabulary checks of one value, then its assignment into the owner.
template <class Owner>
void assign(Owner& owner, const KeySpec<Owner>& spec, const toml::node& node, std::string_view section) {
  auto where = "'" + std::string(spec.key) + "' in " + section_label(section);
  auto check_choice = [&](const std::string& value, const toml::node& at) {
    if (spec.choices.empty() ||
        std::find(spec.choices.begin(), spec.choices.end(), value) != spec.choices.end())
      return;
    std::string msg = where + " has unknown value '" + value + "'";
    if (auto hint = closest(value, spec.choices)) msg += "; did you mean '" + *hint + "'?";
    fail(msg + " (known: " + join(spec.choices) + ")", loc_of(at));
  };
  std::visit(
      [&](auto get) {
        using F = FieldOf<Owner, decltype(get)>;
        F& field = get(owner);
        if constexpr (std::is_same_v<F, int64_t> || std::is_same_v<F, double>) {
          field = *node.value<F>();
          std::ostringstream got;
          got << field;
          // One stream per message: GCC 12 at -O3 warns (-Wrestrict, falsely) on some chains of string +.
          auto beyond = [&](const std::string& limit) {
            std::ostringstream msg;
            msg << where << " is " << got.str() << ", beyond any GPU (the limit is " << limit << ")";
            fail(msg.str(), loc_of(node));
          };
          if constexpr (std::is_same_v<F, double>) {
            if (!std::isfinite(field)) fail(where + " must be a finite number, got " + got.str(), loc_of(node));
            if (std::fabs(field) >= kMaxReal) beyond("1e12");
          } else {
            const int64_t limit = spec.key.ends_with("_bytes") ? kMaxBytes : kMaxCount;
            if (field >= limit || field <= -limit) beyond(std::to_string(limit));
          }
          if (spec.range == Range::positive && !(field > 0))
            fail(where + " must be positive, got " + got.str(), loc_of(node));
          if (spec.range == Range::non_negative && field < 0)
            fail(where + " must not be negative, got " + got.str(), loc_of(node));
          if (spec.range == Range::fraction && !(field > 0 && field <= 1))
            fail(where + " must be a fraction in (0, 1], got " + got.str(), loc_of(node));
        } else if constexpr (std::is_same_v<F, std::string>) {
          field = node.as_string()->get();
          if (field.empty()) fail(where + " must not be empty", loc_of(node));
          check_choice(field, node);
        } else if constexpr (std::is_same_v<F, bool>) {
          field = node.as_boolean()->get();
        } else if constexpr (std::is_same_v<F, std::vector<int64_t>>) {
          field.clear();
          for (const toml::node& e : *node.as_array()) {
            field.push_back(e.as_integer()->get());
            if (field.back() < 0) fail(where + " must not hold negative numbers", loc_of(e));
            if (field.back() >= kMaxCount) {
              std::ostringstream msg;
              msg << where << " holds " << field.back() << ", beyond any GPU (the limit is " << kMaxCount << ")";
              fail(msg.str(), loc_of(e));
            }
          }
          if (field.empty()) fail(where + " must not be empty", loc_of(node));
        } else {
          field.clear();
          for (const toml::node& e : *node.as_array()) {
            field.push_back(e.as_string()->get());
            check_choice(field.back(), e);
          }
          if (field.empty()) fail(where + " must not be empty", loc_of(node));
        }
      },
      spec.field);
}

// Fills `owner` by the schema from `lookup(key)` (the winning node or nullptr); `header` locates "missing
// key" errors.
template <class Owner, class Lookup>
void fill_fields(Owner& owner, std::span<const KeySpec<Owner>> keys, const Lookup& lookup,
                 std::string_view section, const SourceLoc& header) {
  for (const auto& spec : keys) {
    if (const toml::node* node = lookup(spec.key))
      assign(owner, spec, *node, section);
    else if (spec.need == Need::required)
      fail("missing required key '" + std::string(spec.key) + "' in " + section_label(section), header);
  }
}

const VendorRule& vendor_rule(std::string_view vendor) {
  for (const auto& r : kVendorRules)
    if (r.vendor == vendor) return r;
  internal_failure(__FILE__, __LINE__, "vendor_rule",
                   "vendor passed the vocabulary check but has no VendorRule");
}

// Cross-key rules that single-key ranges cannot express.
void validate_target(const Target& t, const Merged& m) {
  const Execution& ex = t.execution;
  if (!std::has_single_bit(static_cast<uint64_t>(ex.warp_size)))
    fail("'warp_size' in [execution] must be a power of two, got " + std::to_string(ex.warp_size),
         m.loc("execution", "warp_size"));
  if (ex.max_threads_per_block % ex.warp_size != 0)
    fail("'max_threads_per_block' in [execution] (" + std::to_string(ex.max_threads_per_block) +
             ") must be a multiple of 'warp_size' (" + std::to_string(ex.warp_size) + ")",
         m.loc("execution", "max_threads_per_block"));
  if (ex.max_threads_per_block > ex.max_threads_per_sm)
    fail("'max_threads_per_block' in [execution] (" + std::to_string(ex.max_threads_per_block) +
             ") exceeds 'max_threads_per_sm' (" + std::to_string(ex.max_threads_per_sm) + ")",
         m.loc("execution", "max_threads_per_block"));

  const Memory& mem = t.memory;
  if (mem.smem_per_block_optin < mem.smem_per_block_default)
    fail("'smem_per_block_optin' in [memory] (" + std::to_string(mem.smem_per_block_optin) +
             ") is smaller than 'smem_per_block_default' (" + std::to_string(mem.smem_per_block_default) +
             ")",
         m.loc("memory", "smem_per_block_optin"));
  if (mem.smem_per_block_optin > mem.smem_per_sm)
    fail("'smem_per_block_optin' in [memory] (" + std::to_string(mem.smem_per_block_optin) +
             ") exceeds 'smem_per_sm' (" + std::to_string(mem.smem_per_sm) + ")",
         m.loc("memory", "smem_per_block_optin"));
  if (mem.smem_per_block_optin + mem.smem_reserved_per_block > mem.smem_per_sm)
    fail("'smem_per_block_optin' plus 'smem_reserved_per_block' in [memory] (" +
             std::to_string(mem.smem_per_block_optin) + " + " + std::to_string(mem.smem_reserved_per_block) +
             ") exceeds 'smem_per_sm' (" + std::to_string(mem.smem_per_sm) + ")",
         m.loc("memory", "smem_reserved_per_block"));
  if (t.registers.regs_per_block > t.registers.regs_per_sm)
    fail("'regs_per_block' in [registers] (" + std::to_string(t.registers.regs_per_block) +
             ") exceeds 'regs_per_sm' (" + std::to_string(t.registers.regs_per_sm) + ")",
         m.loc("registers", "regs_per_block"));

  const VendorRule* rule = &vendor_rule(t.identity.vendor);
  const std::string& arch = t.identity.arch;
  bool arch_ok = arch.starts_with(rule->arch_prefix) && arch.size() > rule->arch_prefix.size() &&
                 std::all_of(arch.begin() + static_cast<std::ptrdiff_t>(rule->arch_prefix.size()), arch.end(),
                             [](unsigned char c) { return std::isalnum(c) != 0; });
  if (!arch_ok)
    fail("arch '" + arch + "' does not fit vendor '" + t.identity.vendor + "': its archs are spelled " +
             std::string(rule->arch_prefix) + "..., e.g. '" + std::string(rule->arch_example) + "'",
         m.loc("identity", "arch"));
}

// A lane layout (docs/targets.md, "Lane layouts") must name every element of its operand exactly once: its lists
// have one weight per bit of (lane, value), and the lanes are those of one warp or wave.
void validate_lane_layouts(const Target& t, const MatrixInstr& mi, const toml::table& entry) {
  auto at = [&](std::string_view key) { return loc_of(*entry.get(key)); };
  struct Operand {
    std::string_view rows, cols;
    const std::vector<int64_t> &r, &c;
    int64_t height, width;
  };
  const Operand operands[] = {{"a_rows", "a_cols", mi.a_rows, mi.a_cols, mi.m, mi.k},
                              {"b_rows", "b_cols", mi.b_rows, mi.b_cols, mi.k, mi.n},
                              {"c_rows", "c_cols", mi.c_rows, mi.c_cols, mi.m, mi.n}};
  int present = 0;
  for (const Operand& o : operands) present += entry.contains(o.rows) + entry.contains(o.cols);
  if (present == 0) return;
  for (const Operand& o : operands)
    for (std::string_view key : {o.rows, o.cols})
      if (!entry.contains(key))
        fail("[[matrix]] '" + mi.op + "' gives lane layouts but not '" + std::string(key) +
                 "' (a layout needs all six lists)",
             loc_of(entry));
  if (mi.scope != "warp" && mi.scope != "wave")
    fail("lane layouts are only known for instructions of one warp or wave, not scope '" + mi.scope + "'",
         at("a_rows"));
  int lane_bits = std::countr_zero(static_cast<uint64_t>(t.execution.warp_size));
  if (!std::has_single_bit(static_cast<uint64_t>(t.execution.warp_size)))
    fail("lane layouts need a power-of-two warp size", at("a_rows"));
  for (const Operand& o : operands) {
    if (o.r.size() != o.c.size())
      fail("'" + std::string(o.rows) + "' and '" + std::string(o.cols) + "' must have the same length", at(o.rows));
    int bits = static_cast<int>(o.r.size());
    int64_t elements = o.height * o.width;
    if (bits < lane_bits || bits > 20 || (int64_t{1} << bits) != elements)
      fail("'" + std::string(o.rows) + "' has " + std::to_string(bits) + " weights, but a " +
               std::to_string(o.height) + "x" + std::to_string(o.width) + " operand over " +
               std::to_string(t.execution.warp_size) + " lanes needs " + std::to_string(std::countr_zero(
                   static_cast<uint64_t>(std::bit_ceil(static_cast<uint64_t>(elements))))) +
               " (lane bits first, then value bits)",
           at(o.rows));
    std::vector<bool> seen(static_cast<size_t>(elements), false);
    for (int64_t i = 0; i < elements; ++i) {
      int64_t row = 0, col = 0;
      for (int b = 0; b < bits; ++b)
        if ((i >> b) & 1) {
          row += o.r[static_cast<size_t>(b)];
          col += o.c[static_cast<size_t>(b)];
        }
      if (row >= o.height || col >= o.width || seen[static_cast<size_t>(row * o.width + col)])
        fail("'" + std::string(o.rows) + "'/'" + std::string(o.cols) + "' do not map (lane, value) one to one onto the " +
                 std::to_string(o.height) + "x" + std::to_string(o.width) + " operand (lane " +
                 std::to_string(i & ((int64_t{1} << lane_bits) - 1)) + ", value " + std::to_string(i >> lane_bits) +
                 " lands on row " + std::to_string(row) + ", column " + std::to_string(col) + ")",
             at(o.rows));
      seen[static_cast<size_t>(row * o.width + col)] = true;
    }
  }
}

void validate_matrix(const Target& t, const Merged& m) {
  const VendorRule* rule = &vendor_rule(t.identity.vendor);
  bool any_warpgroup = false;
  for (size_t i = 0; i < t.matrix.size(); ++i) {
    const MatrixInstr& mi = t.matrix[i];
    const toml::table& entry = *(*m.matrix)[i].as_table();
    auto at = [&](std::string_view key) { return loc_of(*entry.get(key)); };
    if (std::find(rule->scopes.begin(), rule->scopes.end(), mi.scope) == rule->scopes.end())
      fail("'scope' in [[matrix]] is '" + mi.scope + "', which vendor '" + t.identity.vendor +
               "' does not have (its scopes: " + join(rule->scopes) + ")",
           at("scope"));
    if (entry.contains("n_step") && !entry.contains("n_max"))
      fail("'n_step' in [[matrix]] needs 'n_max' (the largest N)", at("n_step"));
    if (entry.contains("n_max")) {
      if (mi.n_max < mi.n)
        fail("'n_max' in [[matrix]] (" + std::to_string(mi.n_max) + ") is smaller than 'n' (" +
                 std::to_string(mi.n) + ")",
             at("n_max"));
      if (mi.n_max > mi.n && !entry.contains("n_step"))
        fail("'n_max' in [[matrix]] needs 'n_step' (the spacing of the allowed N values)", at("n_max"));
      if (mi.n_max > mi.n && (mi.n_max - mi.n) % mi.n_step != 0)
        fail("'n_max' - 'n' in [[matrix]] (" + std::to_string(mi.n_max - mi.n) +
                 ") is not a multiple of 'n_step' (" + std::to_string(mi.n_step) + ")",
             at("n_max"));
    }
    validate_lane_layouts(t, mi, entry);
    if (mi.scope == "warpgroup") {
      any_warpgroup = true;
      if (!t.async.wgmma)
        fail("a [[matrix]] instruction with scope 'warpgroup' needs 'wgmma = true' in [async]", at("scope"));
    }
  }
  if (t.async.wgmma && !any_warpgroup)
    fail("'wgmma' in [async] is true but no [[matrix]] instruction has scope 'warpgroup'",
         m.loc("async", "wgmma"));
}

std::string format_bytes(int64_t bytes) {
  return bytes % 1024 == 0 ? std::to_string(bytes / 1024) + " KiB" : std::to_string(bytes) + " B";
}

}  // namespace

int64_t block_smem_limit(const Target& t) { return t.memory.smem_per_block_optin; }

int64_t resident_blocks_per_sm(const Target& t, int64_t threads, int64_t smem_bytes, int64_t regs_per_thread) {
  const Execution& ex = t.execution;
  const int64_t warps = (threads + ex.warp_size - 1) / ex.warp_size, occupied = warps * ex.warp_size;
  if (threads <= 0 || threads > ex.max_threads_per_block || smem_bytes > t.memory.smem_per_block_optin ||
      regs_per_thread * occupied > t.registers.regs_per_block)
    return 0;
  const int64_t by_threads = ex.max_threads_per_sm / occupied;
  // A block without shared memory on a target that reserves none is not limited by it (issue 17: this divided by 0).
  const int64_t block_smem = smem_bytes + t.memory.smem_reserved_per_block;
  const int64_t by_smem = block_smem > 0 ? t.memory.smem_per_sm / block_smem : ex.max_blocks_per_sm;
  const int64_t by_regs = regs_per_thread > 0 ? t.registers.regs_per_sm / (regs_per_thread * occupied) : by_threads;
  return std::min({ex.max_blocks_per_sm, by_threads, by_smem, by_regs});
}

int64_t busy_blocks_per_sm(const Target& t, int64_t blocks, int64_t threads, int64_t smem_bytes) {
  const int64_t sms = t.execution.sms;
  return std::min(resident_blocks_per_sm(t, threads, smem_bytes, 0), (blocks + sms - 1) / sms);
}

int64_t block_threads(const Target& t, int64_t blocks, int64_t threads, bool has_matmul, int64_t loop,
                      int64_t largest_tile) {
  if (has_matmul) return threads;
  while (blocks < t.execution.sms && threads * 2 <= t.execution.max_threads_per_block / 2) threads *= 2;
  const int64_t warp = t.execution.warp_size;
  while (loop > 1 && threads > warp && threads % (2 * warp) == 0 && largest_tile < 2 * threads) threads /= 2;
  return threads;
}

int64_t block_threads(const Target& t, const ir::Graph& body) {
  const ir::BlockParams& p = body.block_params();
  bool has_matmul = false;
  for (const ir::Node& n : body.nodes()) has_matmul = has_matmul || n.op == ir::OpCode::matmul;
  int64_t largest_tile = 0;  // of the tiles the block computes on (a save's result is the whole output)
  for (const ir::Node& n : body.nodes())
    if (n.op != ir::OpCode::save)
      for (int i = 0; i < n.num_results; ++i) largest_tile = std::max(largest_tile, body.type(body.result(n, i)).numel());
  return block_threads(t, p.grid[0] * p.grid[1] * p.grid[2], p.threads, has_matmul, p.loop, largest_tile);
}

MatmulTiling matmul_tiling(const Target& t, const MatrixInstr& mi, int64_t batches, int64_t rows, int64_t cols,
                           int64_t k, int64_t warps) {
  // At least one atom and one task (a result narrower than the instruction is padded), so that no count divides by 0.
  const int64_t atoms = std::max<int64_t>(1, cols / mi.n), steps = k / mi.k;
  MatmulTiling m;
  // Up to four atoms per task (measured on the H100: fewer atoms per task to occupy more warps was slower,
  // bench/notes-fast-kernels-1.md).
  m.atoms_n = atoms % 4 == 0 ? 4 : atoms % 2 == 0 ? 2 : 1;
  m.tasks = batches * ((rows + mi.m - 1) / mi.m) * (atoms / m.atoms_n);
  while (m.tasks * m.k_split * 2 <= warps && steps % (m.k_split * 2) == 0) m.k_split *= 2;
  const int64_t teams = std::max<int64_t>(1, warps / m.k_split), per_warp = (m.tasks + teams - 1) / teams;
  m.registers = per_warp * m.atoms_n * MatrixInstr::lane_values(mi.c_rows, t.execution.warp_size);
  return m;
}

bool accumulators_fit(const Target& t, const MatmulTiling& tiling) {
  return accumulator_registers_fit(t, tiling.registers);
}

bool accumulator_registers_fit(const Target& t, int64_t registers) {
  return registers * 4 <= t.registers.max_regs_per_thread;
}

bool register_tiles_fit(const Target& t, int64_t live, int64_t largest) {
  return live <= t.registers.max_regs_per_thread * 3 / 4 && largest <= t.registers.max_regs_per_thread / 3;
}

bool loop_loads_fit_registers(const Target& t, int64_t loop, int64_t registers, int64_t dtype_bytes) {
  return loop >= 2 && loop <= kMaxPreloadIterations &&
         loop * registers * dtype_bytes <= 4 * t.registers.max_regs_per_thread / 2;
}

int64_t pipeline_stages(const Target& t, int64_t blocks, int64_t threads, int64_t smem_bytes, int64_t stage_bytes,
                        int64_t loop, int64_t stream_bytes) {
  if (!t.async.cp_async || loop < 2 || stage_bytes <= 0) return 1;
  const int64_t busy = busy_blocks_per_sm(t, blocks, threads, smem_bytes);
  int64_t most = t.async.max_stages;
  if (t.async.in_flight_bytes > 0 && stream_bytes > 0) {
    // With s buffers a block has s - 1 stages' copies in flight while it reads one: the fewest that, over the
    // blocks resident at once, keep in_flight_bytes requested from the DRAM.
    const int64_t resident = std::max<int64_t>(1, std::min(blocks, busy * t.execution.sms));
    const int64_t per_stage = resident * stream_bytes;
    const int64_t ahead = (t.async.in_flight_bytes + per_stage - 1) / per_stage;
    most = std::min(most, std::max<int64_t>(2, ahead + 1));
  }
  for (int64_t stages = std::min(most, loop); stages >= 2; --stages) {
    const int64_t smem = smem_bytes + (stages - 1) * stage_bytes;
    if (smem <= block_smem_limit(t) && busy_blocks_per_sm(t, blocks, threads, smem) >= busy) return stages;
  }
  return 1;
}

bool engine_takes_rows(const Target& t, int64_t row_bytes, int64_t row_elements, int64_t rows, bool swizzled) {
  if (!t.async.tma || row_bytes % kAsyncCopyBytes != 0 || row_elements > kEngineMaxBox) return false;
  if (!swizzled || engine_swizzle_bytes(row_bytes) != 0) return true;
  return std::min(std::gcd(row_bytes / kAsyncCopyBytes, int64_t{8}), rows) <= 2;
}

bool preload_fits(const Target& t, int64_t blocks, int64_t threads, int64_t smem_bytes, int64_t loop_bytes,
                  int64_t loop) {
  if (loop < 2 || loop > kMaxPreloadIterations || loop_bytes <= 0) return false;
  const int64_t smem = smem_bytes + (loop - 1) * loop_bytes;
  return smem <= block_smem_limit(t) &&
         busy_blocks_per_sm(t, blocks, threads, smem) >= busy_blocks_per_sm(t, blocks, threads, smem_bytes);
}

Target load_target(const fs::path& file, const fs::path& root) {
  std::vector<Layer> chain = load_chain(file, root.empty() ? file.parent_path() : root);
  Merged m = merge(chain);

  Target t;
  t.file = chain.front().file;
  for (size_t i = 1; i < chain.size(); ++i) t.bases.emplace_back(chain[i].file);
  for (const auto& s : kSections) {
    auto header = m.headers.find(s.name);
    if (header == m.headers.end())
      fail("missing required section [" + std::string(s.name) + "]", SourceLoc{m.leaf, 1, 1});
    fill_fields<Target>(
        t, s.keys, [&](std::string_view key) { return m.get(s.name, key); }, s.name, header->second);
  }
  if (m.matrix) {
    for (const toml::node& e : *m.matrix) {
      MatrixInstr mi;
      const toml::table& entry = *e.as_table();
      fill_fields<MatrixInstr>(
          mi, kMatrixKeys, [&](std::string_view key) { return entry.get(key); }, kMatrixSection, loc_of(e));
      // A single N unless a range is given; validate_matrix checks that n_step comes with a range that needs
      // it.
      if (!entry.contains("n_max")) mi.n_max = mi.n;
      if (!entry.contains("n_step")) mi.n_step = 1;
      t.matrix.push_back(std::move(mi));
    }
  }
  validate_target(t, m);
  validate_matrix(t, m);
  return t;
}

std::vector<fs::path> list_target_files(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail("target directory '" + display(dir) + "' does not exist", SourceLoc{});
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".toml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<Target> load_all_targets(const fs::path& dir) {
  std::vector<Target> targets;
  for (const auto& f : list_target_files(dir)) targets.push_back(load_target(f, dir));
  return targets;
}

Target find_target(std::string_view name, const fs::path& dir) {
  std::vector<fs::path> matches;
  std::vector<std::string> names;
  for (const auto& f : list_target_files(dir)) {
    names.push_back(f.stem().string());
    if (f.stem() == name) matches.push_back(f);
  }
  if (matches.size() > 1)
    fail("target name '" + std::string(name) + "' is ambiguous: " + display(matches[0]) + " and " +
             display(matches[1]),
         SourceLoc{});
  if (matches.empty()) {
    std::string msg = "unknown target '" + std::string(name) + "'";
    if (auto hint = closest(name, names)) msg += "; did you mean '" + *hint + "'?";
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    fail(msg + " (known: " + known + ")", SourceLoc{});
  }
  return load_target(matches.front(), dir);
}

std::string render_targets_table(const std::vector<Target>& targets) {
  // Text columns are left-aligned, numeric ones right-aligned.
  struct Column {
    std::string_view header;
    bool numeric;
  };
  const Column columns[] = {{"name", false},         {"vendor", false}, {"arch", false},
                            {"SMs/CUs", true},       {"warp", true},    {"smem opt-in", true},
                            {"DRAM bandwidth", true}};
  std::vector<std::vector<std::string>> rows;
  for (const Target& t : targets) {
    std::ostringstream bw;
    bw << t.memory.dram_bandwidth_gbps << " GB/s";
    rows.push_back({t.identity.name, t.identity.vendor, t.identity.arch, std::to_string(t.execution.sms),
                    std::to_string(t.execution.warp_size), format_bytes(t.memory.smem_per_block_optin),
                    bw.str()});
  }
  std::vector<size_t> width;
  for (const auto& c : columns) width.push_back(c.header.size());
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());

  std::string out;
  auto emit = [&](auto cell_of) {
    std::string line;
    for (size_t i = 0; i < width.size(); ++i) {
      std::string cell(cell_of(i));
      std::string pad(width[i] - cell.size(), ' ');
      line += (i ? "  " : "") + (columns[i].numeric ? pad + cell : cell + pad);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  };
  emit([&](size_t i) { return columns[i].header; });
  for (const auto& r : rows) emit([&](size_t i) { return r[i]; });
  return out;
}

}  // namespace morgana::targets
