// Variant selection (runtime/select.h) as a table: fake devices of compute capability 8.0, 8.6, 8.9, 9.0 and
// 12.0 against bundles with and without PTX, the finer rules ("a" and "f" archs, PTX ordering, ties), AMD
// target IDs, and the exact error text.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/select.h"

namespace morgana::runtime {
namespace {

using bundle::VariantKind;

constexpr VariantKind cubin = VariantKind::cubin, ptx = VariantKind::ptx, hsaco = VariantKind::hsaco;

DeviceTarget nv(int major, int minor) {
  return DeviceTarget{Vendor::nvidia, major, minor, {}};
}

DeviceTarget amd(std::string gfx) {
  return DeviceTarget{Vendor::amd, 0, 0, std::move(gfx)};
}

// The arch chosen, or "error: <message>".
std::string pick(const DeviceTarget& d, const std::vector<Candidate>& c) {
  Selection s = select_variant(d, c, "attn");
  if (!s.index) return "error: " + s.error;
  EXPECT_TRUE(s.error.empty());
  return std::string(c[*s.index].arch) +
         (c[*s.index].target.empty() ? "" : "@" + std::string(c[*s.index].target));
}

const std::vector<Candidate> with_ptx = {{cubin, "sm_80", "a100"},
                                         {cubin, "sm_89", "l40s"},
                                         {cubin, "sm_90a", "h200"},
                                         {ptx, "compute_80", "a100"}};
const std::vector<Candidate> cubins_only = {
    {cubin, "sm_80", "a100"}, {cubin, "sm_89", "l40s"}, {cubin, "sm_90a", "h200"}};

TEST(Select, TableWithPtx) {
  EXPECT_EQ(pick(nv(8, 0), with_ptx), "sm_80@a100");        // exact SASS
  EXPECT_EQ(pick(nv(8, 6), with_ptx), "sm_80@a100");        // same major, lower minor, before PTX
  EXPECT_EQ(pick(nv(8, 9), with_ptx), "sm_89@l40s");        // exact beats a lower minor
  EXPECT_EQ(pick(nv(9, 0), with_ptx), "sm_90a@h200");       // arch-specific on its own GPU
  EXPECT_EQ(pick(nv(12, 0), with_ptx), "compute_80@a100");  // no SASS across majors: the PTX
}

TEST(Select, TableCubinsOnly) {
  EXPECT_EQ(pick(nv(8, 0), cubins_only), "sm_80@a100");
  EXPECT_EQ(pick(nv(8, 6), cubins_only), "sm_80@a100");
  EXPECT_EQ(pick(nv(8, 9), cubins_only), "sm_89@l40s");
  EXPECT_EQ(pick(nv(9, 0), cubins_only), "sm_90a@h200");
  EXPECT_EQ(
      pick(nv(12, 0), cubins_only),
      "error: no code for NVIDIA GPU compute capability 12.0 (sm_120) in program 'attn': the bundle has "
      "cubin sm_80 (a100), cubin sm_89 (l40s), cubin sm_90a (h200); add a target for this GPU or include "
      "PTX");
}

TEST(Select, NeverAcrossMajors) {
  // The H200 (9.0) refuses sm_80/86/89 cubins with CUDA_ERROR_NO_BINARY_FOR_GPU: a cubin for X.y runs only
  // on X.z, z >= y (CUDA C++ Programming Guide, "Binary Compatibility",
  // https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#binary-compatibility).
  EXPECT_EQ(
      pick(nv(9, 0), {{cubin, "sm_80", "a100"}, {cubin, "sm_89", "l40s"}}),
      "error: no code for NVIDIA GPU compute capability 9.0 (sm_90) in program 'attn': the bundle has cubin "
      "sm_80 (a100), cubin sm_89 (l40s); add a target for this GPU or include PTX");
  EXPECT_EQ(pick(nv(8, 0), {{cubin, "sm_86", "x"}, {cubin, "sm_90", "h100"}}).substr(0, 7), "error: ");
}

TEST(Select, ArchSpecificBeforePlainOnItsOwnGpuOnly) {
  EXPECT_EQ(pick(nv(9, 0), {{cubin, "sm_90", "a"}, {cubin, "sm_90a", "b"}}), "sm_90a@b");
  EXPECT_EQ(pick(nv(9, 0), {{cubin, "sm_90a", "b"}, {cubin, "sm_90", "a"}}), "sm_90a@b");
  // Family code sits between the two on its own GPU, and runs on later minors of its major; "a" code does
  // not.
  EXPECT_EQ(pick(nv(10, 0), {{cubin, "sm_100", "a"}, {cubin, "sm_100f", "f"}}), "sm_100f@f");
  EXPECT_EQ(pick(nv(10, 3), {{cubin, "sm_100a", "a"}, {cubin, "sm_100f", "f"}}), "sm_100f@f");
  EXPECT_EQ(pick(nv(10, 3), {{cubin, "sm_100a", "a"}}).substr(0, 7), "error: ");
  EXPECT_EQ(pick(nv(10, 3), {{cubin, "sm_100a", "a"}, {cubin, "sm_100", "p"}}), "sm_100@p");
}

TEST(Select, HighestLowerMinorFirst) {
  EXPECT_EQ(pick(nv(8, 9), {{cubin, "sm_80", "a"}, {cubin, "sm_86", "b"}, {ptx, "compute_89", "c"}}),
            "sm_86@b");
  EXPECT_EQ(pick(nv(8, 6), {{cubin, "sm_89", "l40s"}, {cubin, "sm_80", "a100"}}), "sm_80@a100");
}

TEST(Select, HighestPtxNotAboveTheDevice) {
  const std::vector<Candidate> ptxs = {
      {ptx, "compute_70", "v"}, {ptx, "compute_90", "h"}, {ptx, "compute_80", "a"}};
  EXPECT_EQ(pick(nv(8, 6), ptxs), "compute_80@a");
  EXPECT_EQ(pick(nv(12, 0), ptxs), "compute_90@h");
  EXPECT_EQ(pick(nv(9, 0), ptxs), "compute_90@h");
  EXPECT_EQ(pick(nv(7, 5), ptxs), "compute_70@v");
  EXPECT_EQ(pick(nv(6, 1), ptxs).substr(0, 7), "error: ");
  // Arch-specific PTX only on exactly its GPU, ahead of plain PTX of the same version there.
  EXPECT_EQ(pick(nv(9, 0), {{ptx, "compute_90", "p"}, {ptx, "compute_90a", "a"}}), "compute_90a@a");
  EXPECT_EQ(pick(nv(12, 0), {{ptx, "compute_90a", "a"}}).substr(0, 7), "error: ");
  EXPECT_EQ(pick(nv(12, 1), {{ptx, "compute_120f", "f"}}), "compute_120f@f");
  EXPECT_EQ(pick(nv(13, 0), {{ptx, "compute_120f", "f"}}).substr(0, 7), "error: ");
}

TEST(Select, SassBeforeAnyPtx) {
  EXPECT_EQ(pick(nv(9, 0), {{ptx, "compute_90a", "p"}, {cubin, "sm_90", "c"}}), "sm_90@c");
}

TEST(Select, TiesGoToTheEarlierCandidate) {
  EXPECT_EQ(pick(nv(8, 0), {{cubin, "sm_80", "first"}, {cubin, "sm_80", "second"}}), "sm_80@first");
}

TEST(Select, UnknownArchsNeverRun) {
  EXPECT_EQ(
      pick(nv(9, 0), {{cubin, "sm_90x", "x"}, {cubin, "sm_9", "y"}, {ptx, "compute_", "z"}}).substr(0, 7),
      "error: ");
}

TEST(Select, VendorsDoNotMix) {
  EXPECT_EQ(
      pick(nv(9, 0), {{hsaco, "gfx942", "mi300x"}}),
      "error: no code for NVIDIA GPU compute capability 9.0 (sm_90) in program 'attn': the bundle has hsaco "
      "gfx942 (mi300x); add a target for this GPU or include PTX");
  EXPECT_EQ(
      pick(amd("gfx942:sramecc+:xnack-"), {{cubin, "sm_90a", "h200"}, {ptx, "compute_80", "a100"}}),
      "error: no code for AMD GPU gfx942:sramecc+:xnack- in program 'attn': the bundle has cubin sm_90a "
      "(h200), ptx compute_80 (a100); add a target for this GPU");
}

TEST(Select, AmdSameProcessorAndCompatibleFeatures) {
  const std::vector<Candidate> code = {{hsaco, "gfx90a", "mi250"},
                                       {hsaco, "gfx942:xnack+", "xnack_on"},
                                       {hsaco, "gfx942", "any"},
                                       {hsaco, "gfx942:sramecc+:xnack-", "exact"}};
  EXPECT_EQ(pick(amd("gfx942:sramecc+:xnack-"), code), "gfx942:sramecc+:xnack-@exact");
  EXPECT_EQ(pick(amd("gfx942:sramecc-:xnack-"), code), "gfx942@any");  // "any" fits every setting
  EXPECT_EQ(pick(amd("gfx942:sramecc+:xnack+"), code), "gfx942:xnack+@xnack_on");
  EXPECT_EQ(pick(amd("gfx90a:sramecc+:xnack-"), code), "gfx90a@mi250");
  EXPECT_EQ(pick(amd("gfx1100"), code).substr(0, 45), "error: no code for AMD GPU gfx1100 in program");
  // A setting the device does not report (the processor lacks the feature) does not fit.
  EXPECT_EQ(pick(amd("gfx1100"), {{hsaco, "gfx1100:xnack-", "x"}}).substr(0, 7), "error: ");
}

TEST(Select, EmptyList) {
  EXPECT_EQ(pick(nv(9, 0), {}),
            "error: no code for NVIDIA GPU compute capability 9.0 (sm_90) in program 'attn': the bundle has "
            "no code "
            "objects; add a target for this GPU or include PTX");
}

TEST(Select, Describe) {
  EXPECT_EQ(describe(nv(8, 6)), "NVIDIA GPU compute capability 8.6 (sm_86)");
  EXPECT_EQ(describe(nv(10, 0)), "NVIDIA GPU compute capability 10.0 (sm_100)");
  EXPECT_EQ(describe(amd("gfx942:sramecc+:xnack-")), "AMD GPU gfx942:sramecc+:xnack-");
}

}  // namespace
}  // namespace morgana::runtime
