// The parameter contract (contract.h).
#include "contract.h"

#include <cstddef>

namespace morgana::runtime {
namespace {

using bundle::Parameter;
using bundle::Role;

std::string dims(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// "'q' input bf16[2, 8] strides [8, 1]"
std::string describe(const Parameter& p) {
  return "'" + p.name + "' " + std::string(bundle::name(p.role)) + " " + std::string(bundle::name(p.dtype)) +
         dims(p.shape) + " strides " + dims(p.strides);
}

std::string kernel_subject(const bundle::Program& program, size_t k) {
  return "kernel " + std::to_string(k) + " (" + program.kernels[k].name + ")";
}

int role_order(Role r) {
  return r == Role::input ? 0 : r == Role::output ? 1 : 2;
}

}  // namespace

std::optional<std::string> check_parameter_contract(const bundle::Program& program) {
  if (program.kernels.empty()) return "no kernels";
  const std::vector<Parameter>& params = program.kernels[0].params;
  const std::string first = kernel_subject(program, 0);
  const char* order = " (the order is inputs, then outputs, then the workspace)";

  size_t outputs = 0, workspaces = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = params[i];
    if (i > 0 && role_order(p.role) < role_order(params[i - 1].role))
      return first + ": parameter " + std::to_string(i) + " ('" + p.name + "') is an " +
             std::string(bundle::name(p.role)) + " after " + std::string(bundle::name(params[i - 1].role)) +
             " '" + params[i - 1].name + "'" + order;
    outputs += p.role == Role::output;
    if (p.role == Role::workspace && ++workspaces > 1)
      return first + ": a second workspace parameter '" + p.name + "' (a program has at most one)";
  }
  if (outputs == 0) return first + ": no output parameter (a program writes at least one output)";
  if (program.workspace_bytes > 0 && workspaces == 0)
    return first + ": no workspace parameter, but the program needs " +
           std::to_string(program.workspace_bytes) + " workspace bytes";
  if (program.workspace_bytes == 0 && workspaces > 0)
    return first + ": a workspace parameter '" + params.back().name +
           "', but the program has no workspace bytes";

  for (size_t k = 1; k < program.kernels.size(); ++k) {
    const std::vector<Parameter>& other = program.kernels[k].params;
    const char* why = " (every kernel of a program takes the program's parameters, in the same order)";
    if (other.size() != params.size())
      return kernel_subject(program, k) + " has " + std::to_string(other.size()) + " parameters, " + first +
             " has " + std::to_string(params.size()) + why;
    for (size_t i = 0; i < params.size(); ++i) {
      if (other[i] != params[i])
        return kernel_subject(program, k) + ": parameter " + std::to_string(i) + " is " + describe(other[i]) +
               ", in " + first + " it is " + describe(params[i]) + why;
    }
  }
  return std::nullopt;
}

}  // namespace morgana::runtime
