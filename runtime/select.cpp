// Variant selection (select.h): every candidate gets a score or none, and the best score wins.
#include "select.h"

#include <map>
#include <tuple>
#include <vector>

namespace morgana::runtime {
namespace {

using bundle::VariantKind;

// An NVIDIA arch: sm_90a is compute capability 9.0, suffix 'a'; sm_120 is 12.0. The last digit is the minor.
struct NvArch {
  int major = 0, minor = 0;
  char suffix = 0;  // 0, 'a' (arch-specific) or 'f' (family-specific)
};

std::optional<NvArch> parse_nvidia(std::string_view arch, std::string_view prefix) {
  if (arch.substr(0, prefix.size()) != prefix) return std::nullopt;
  arch.remove_prefix(prefix.size());
  int digits = 0;
  int value = 0;
  while (digits < static_cast<int>(arch.size()) && arch[digits] >= '0' && arch[digits] <= '9' && digits < 6)
    value = value * 10 + (arch[digits++] - '0');
  if (digits < 2) return std::nullopt;
  std::string_view rest = arch.substr(digits);
  NvArch a{value / 10, value % 10, 0};
  if (rest.size() == 1 && (rest[0] == 'a' || rest[0] == 'f'))
    a.suffix = rest[0];
  else if (!rest.empty())
    return std::nullopt;  // a suffix this runtime does not know: assume it does not run
  return a;
}

// The order of preference among candidates that run: a lower tier first, then a higher rank, then a higher
// second rank.
struct Score {
  int tier = 0;
  int rank = 0;
  int rank2 = 0;
  auto key() const { return std::tuple(-tier, rank, rank2); }
};

int cc(int major, int minor) {
  return major * 100 + minor;
}

// How specific an NVIDIA suffix is: arch-specific code uses the most of the chip.
int specificity(char suffix) {
  return suffix == 'a' ? 2 : suffix == 'f' ? 1 : 0;
}

std::optional<Score> score_nvidia(const DeviceTarget& d, const Candidate& c) {
  if (c.kind == VariantKind::cubin) {
    auto a = parse_nvidia(c.arch, "sm_");
    if (!a || a->major != d.cc_major) return std::nullopt;
    if (a->minor == d.cc_minor) return Score{0, specificity(a->suffix), 0};
    // SASS runs on later minors of its major, except arch-specific SASS, which runs on its own X.Y only.
    if (a->minor < d.cc_minor && a->suffix != 'a') return Score{1, a->minor, specificity(a->suffix)};
    return std::nullopt;
  }
  if (c.kind == VariantKind::ptx) {
    auto a = parse_nvidia(c.arch, "compute_");
    if (!a) return std::nullopt;
    bool runs = false;
    if (a->suffix == 'a')
      runs = a->major == d.cc_major && a->minor == d.cc_minor;
    else if (a->suffix == 'f')
      runs = a->major == d.cc_major && a->minor <= d.cc_minor;
    else
      runs = cc(a->major, a->minor) <= cc(d.cc_major, d.cc_minor);
    if (!runs) return std::nullopt;
    return Score{2, cc(a->major, a->minor), specificity(a->suffix)};
  }
  return std::nullopt;
}

// "gfx942:sramecc+:xnack-" -> processor "gfx942", features {sramecc: '+', xnack: '-'}.
struct AmdTarget {
  std::string_view processor;
  std::map<std::string_view, char> features;
};

AmdTarget parse_amd(std::string_view id) {
  AmdTarget t;
  size_t colon = id.find(':');
  t.processor = id.substr(0, colon);
  while (colon != std::string_view::npos) {
    id.remove_prefix(colon + 1);
    colon = id.find(':');
    std::string_view feature = id.substr(0, colon);
    if (!feature.empty()) t.features[feature.substr(0, feature.size() - 1)] = feature.back();
  }
  return t;
}

std::optional<Score> score_amd(const DeviceTarget& d, const Candidate& c) {
  if (c.kind != VariantKind::hsaco) return std::nullopt;
  AmdTarget code = parse_amd(c.arch), device = parse_amd(d.gfx);
  if (code.processor != device.processor) return std::nullopt;
  // A code object that leaves a feature unset runs with either setting; one that sets it needs the same.
  for (auto [feature, setting] : code.features) {
    auto it = device.features.find(feature);
    if (it == device.features.end() || it->second != setting) return std::nullopt;
  }
  return Score{0, static_cast<int>(code.features.size()), 0};
}

}  // namespace

std::string describe(const DeviceTarget& device) {
  if (device.vendor == Vendor::amd) return "AMD GPU " + device.gfx;
  const std::string major = std::to_string(device.cc_major), minor = std::to_string(device.cc_minor);
  return "NVIDIA GPU compute capability " + major + "." + minor + " (sm_" + major + minor + ")";
}

Selection select_variant(const DeviceTarget& device, std::span<const Candidate> candidates,
                         std::string_view program) {
  Selection s;
  std::optional<Score> best;
  for (size_t i = 0; i < candidates.size(); ++i) {
    std::optional<Score> score = device.vendor == Vendor::nvidia ? score_nvidia(device, candidates[i])
                                                                 : score_amd(device, candidates[i]);
    if (score && (!best || score->key() > best->key())) {
      best = score;
      s.index = i;
    }
  }
  if (s.index) return s;

  s.error = "no code for " + describe(device) + " in program '" + std::string(program) + "': the bundle has ";
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (i > 0) s.error += ", ";
    s.error += std::string(bundle::name(c.kind)) + " " + std::string(c.arch);
    if (!c.target.empty()) s.error += " (" + std::string(c.target) + ")";
  }
  if (candidates.empty()) s.error += "no code objects";
  s.error += device.vendor == Vendor::nvidia ? "; add a target for this GPU or include PTX"
                                             : "; add a target for this GPU";
  return s;
}

}  // namespace morgana::runtime
