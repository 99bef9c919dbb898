// `morgana compile`: spec or μGraph -> one bundle. For every program of the input and every target asked for, the
// pipeline is lower (targets/lower) -> emit (the target's dialect) -> compile (the target's toolchain); programs
// whose kernels launch alike on several targets share one bundle program with a code object per target, and the
// lowest CUDA arch also gets a PTX fallback the driver can compile for GPUs no target file names.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/bundle.h"
#include "targets/target.h"

namespace morgana::frontend {

struct CompileOptions {
  std::vector<targets::Target> targets;  // at least one
  bool ptx_fallback = true;              // add compute_XY PTX for the lowest sm_XY among the CUDA targets
  bool spill_to_global = false;          // tiles beyond shared memory go to global scratch (lower::LowerOptions)
  unsigned jobs = 0;                     // parallel toolchain runs; 0: one per hardware thread
  // Called with one line per finished step ("h200  sm_90a  attn  0.41 s"), from one thread at a time.
  std::function<void(const std::string&)> progress;
};

// Every NVIDIA target file below `dir` (sorted by path): what `compile` and `optimize` build for by default.
std::vector<targets::Target> nvidia_targets(const std::filesystem::path& dir);

// The targets `morgana compile` builds for when none is asked for: every NVIDIA target when a program has no `for`
// list, and every target a `for` list names (each loaded from below `dir`).
std::vector<targets::Target> default_targets(const std::vector<ir::Graph>& programs,
                                             const std::filesystem::path& dir);

// Throws morgana::UserError naming a target that no program is for (ir::serves_target).
void check_targets_served(const std::vector<ir::Graph>& programs, const std::vector<targets::Target>& targets);

// Builds each program for each target it is for (ir::serves_target). Throws morgana::UserError for a target no
// program is for, or a program that does not lower or compile for a target (naming both).
bundle::Bundle compile_programs(const std::vector<ir::Graph>& programs, const CompileOptions& options);

// What --emit prints for one program and target: "cuda" (generated source), "kernel-ir" (the lowered kernels),
// "mugraph" (the program after every predefined op became a block op).
std::string emit_stage(const ir::Graph& program, const targets::Target& target, const std::string& stage);

}  // namespace morgana::frontend
