// Which binary variant of a program runs on a device (DESIGN.md §7). A pure function of the device's identity
// and the variants' kinds and archs, kept apart from the driver so that its table of cases is tested without
// a GPU (tests/runtime/select_test.cpp); the loader calls it with what the live device reports.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "bundle.h"

namespace morgana::runtime {

enum class Vendor { nvidia, amd };

// What selection needs to know of a device.
struct DeviceTarget {
  Vendor vendor = Vendor::nvidia;
  int cc_major = 0, cc_minor = 0;  // NVIDIA compute capability
  std::string gfx;                 // AMD target ID with the live feature settings: "gfx942:sramecc+:xnack-"
};

// One code object that could run a program.
struct Candidate {
  bundle::VariantKind kind = bundle::VariantKind::cubin;
  std::string_view arch;    // "sm_90a", "compute_80", "gfx942:xnack-"
  std::string_view target;  // the target file it was built for; only for messages
};

struct Selection {
  std::optional<size_t> index;  // into the candidates, when one runs on the device
  std::string error;            // otherwise: what the device is and what the program has
};

// "NVIDIA GPU compute capability 12.0 (sm_120)", "AMD GPU gfx942:sramecc+:xnack-"
std::string describe(const DeviceTarget& device);

// The best candidate for `device`, by these rules (the first that applies wins; within a rule, the earlier
// candidate wins a tie):
//   NVIDIA
//   1. SASS for exactly the device's compute capability X.Y: sm_XYa (arch-specific, runs on X.Y only) before
//      sm_XYf (family) before sm_XY;
//   2. SASS for the same major and a lower minor (an sm_80 cubin on 8.6 or 8.9), the highest minor first;
//      never across majors (the driver refuses an sm_80 cubin on 9.0), and never an "a" cubin;
//   3. PTX for compute_XY <= the device (the driver compiles it at load), the highest first; compute_XYa only
//      on exactly X.Y and compute_XYf only within major X.
//   AMD
//   4. a code object for the same processor whose every feature setting (xnack, sramecc) equals the device's;
//      one that names more features first.
// `program` names the program in the error message.
Selection select_variant(const DeviceTarget& device, std::span<const Candidate> candidates,
                         std::string_view program);

}  // namespace morgana::runtime
