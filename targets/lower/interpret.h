// A CPU executor of the kernel IR: runs a LoweredProgram kernel by kernel, block by block, each statement over its
// whole tile, with f32 arithmetic and tensors stored in their element types, as a GPU would. It exists to find
// lowering bugs without a GPU: besides computing the outputs (which tests compare with verify's float reference),
// it checks what a GPU would not report:
//   - a statement that reads shared memory another statement wrote, or writes memory another read or wrote, since
//     the last barrier (a missing barrier: a race on the GPU);
//   - a read of shared memory no statement of the block has written, or of a tile that another tile's write has
//     overwritten (a wrong shared-memory plan);
//   - a global access outside a tensor along a dim the lowering did not mask, or outside its buffer.
// Each of these throws InternalError naming the kernel, statement and μGraph node.
#pragma once

#include <vector>

#include "targets/lower/kernel_ir.h"

namespace morgana::lower {

// One buffer per input parameter, in parameter order: element values in memory order (the element at index i sits
// at sum(i_d * stride_d)), each representable in the parameter's type. Returns the output parameters' buffers in
// the same form. The workspace is allocated here.
std::vector<std::vector<double>> execute(const LoweredProgram& p, const std::vector<std::vector<double>>& inputs);

// Elements a parameter's buffer holds: one past its last element.
int64_t param_span(const Param& p);

}  // namespace morgana::lower
