// The parameter contract (runtime/contract.h): every kernel of a program takes the program's parameters,
// inputs then outputs then the workspace; each broken rule with its exact message.
#include <gtest/gtest.h>

#include "runtime/contract.h"

namespace morgana::runtime {
namespace {

using bundle::DType;
using bundle::Kernel;
using bundle::Parameter;
using bundle::Program;
using bundle::Role;

Parameter p(std::string name, Role role, std::vector<int64_t> shape = {4}) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return Parameter{std::move(name), role, DType::f16, std::move(shape), std::move(strides)};
}

Program program(std::vector<std::vector<Parameter>> kernels, uint64_t workspace = 0) {
  Program prog{"attn", "", workspace, {}, {0}};
  for (size_t k = 0; k < kernels.size(); ++k)
    prog.kernels.push_back(
        Kernel{"attn_k" + std::to_string(k), {1, 1, 1}, {32, 1, 1}, 0, std::move(kernels[k])});
  return prog;
}

const Parameter q = p("q", Role::input), k = p("k", Role::input), o = p("o", Role::output),
                ws = p("ws", Role::workspace, {64});

TEST(Contract, HoldsForSharedListsInOrder) {
  EXPECT_EQ(check_parameter_contract(program({{q, k, o}})), std::nullopt);
  EXPECT_EQ(check_parameter_contract(program({{q, k, o, ws}, {q, k, o, ws}}, 128)), std::nullopt);
  EXPECT_EQ(check_parameter_contract(program({{o}})), std::nullopt);  // a program without inputs
}

TEST(Contract, Order) {
  EXPECT_EQ(check_parameter_contract(program({{q, o, k}})),
            "kernel 0 (attn_k0): parameter 2 ('k') is an input after output 'o' (the order is inputs, then "
            "outputs, then the workspace)");
  EXPECT_EQ(
      check_parameter_contract(program({{q, ws, o}}, 128)),
      "kernel 0 (attn_k0): parameter 2 ('o') is an output after workspace 'ws' (the order is inputs, then "
      "outputs, then the workspace)");
}

TEST(Contract, Workspace) {
  EXPECT_EQ(check_parameter_contract(program({{q, o, ws, p("ws2", Role::workspace)}}, 128)),
            "kernel 0 (attn_k0): a second workspace parameter 'ws2' (a program has at most one)");
  EXPECT_EQ(check_parameter_contract(program({{q, o}}, 128)),
            "kernel 0 (attn_k0): no workspace parameter, but the program needs 128 workspace bytes");
  EXPECT_EQ(check_parameter_contract(program({{q, o, ws}}, 0)),
            "kernel 0 (attn_k0): a workspace parameter 'ws', but the program has no workspace bytes");
}

TEST(Contract, AnOutput) {
  EXPECT_EQ(check_parameter_contract(program({{q, k}})),
            "kernel 0 (attn_k0): no output parameter (a program writes at least one output)");
}

TEST(Contract, EveryKernelTakesTheSameList) {
  EXPECT_EQ(
      check_parameter_contract(program({{q, k, o, ws}, {o, ws}}, 128)),
      "kernel 1 (attn_k1) has 2 parameters, kernel 0 (attn_k0) has 4 (every kernel of a program takes the "
      "program's parameters, in the same order)");
  EXPECT_EQ(
      check_parameter_contract(program({{q, k, o}, {k, q, o}})),
      "kernel 1 (attn_k1): parameter 0 is 'k' input f16[4] strides [1], in kernel 0 (attn_k0) it is 'q' "
      "input f16[4] strides [1] (every kernel of a program takes the program's parameters, in the same "
      "order)");
  EXPECT_EQ(
      check_parameter_contract(program({{q, o}, {q, p("o", Role::output, {2, 2})}})),
      "kernel 1 (attn_k1): parameter 1 is 'o' output f16[2, 2] strides [2, 1], in kernel 0 (attn_k0) it is "
      "'o' output f16[4] strides [1] (every kernel of a program takes the program's parameters, in the same "
      "order)");
}

}  // namespace
}  // namespace morgana::runtime
