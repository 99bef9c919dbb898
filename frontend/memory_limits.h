// What this machine and a target GPU can hold (issue 17, "limits as data"): a spec whose tensors the CPU
// interpreters here or the target's device memory cannot hold is the user's error, named (the largest tensor, the
// bytes, the limit and where it comes from) before anything is allocated. The limits are read, not written down: the
// machine's physical memory, the target file's `dram_bytes`. ir::kMaxElements bounds every tensor before this.
// (Not "limits.h": the frontend folder is on the include path, where that name would hide the C library's.)
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"
#include "targets/target.h"

namespace morgana::frontend {

// Throws UserError when `what` (e.g. "evaluating k") would hold more than this machine's memory: every kernel-level
// tensor of `g` at `bytes_per_element` bytes, times `copies` (a check runs two programs).
void check_fits_host(const ir::Graph& g, int64_t bytes_per_element, int copies, const std::string& what);

// Throws UserError when the kernel-level tensors of `g` in their dtypes (inputs, outputs and the intermediates a
// bundle keeps in its workspace) exceed `t`'s device memory.
void check_fits_device(const ir::Graph& g, const targets::Target& t);

// This machine's physical memory in bytes (0 when the system does not say).
int64_t host_memory_bytes();

}  // namespace morgana::frontend
