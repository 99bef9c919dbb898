// The structural verifier: checks every invariant of a kernel graph and its block graphs, so that graphs built by
// the parser, by hand, or by the search can be trusted by every later stage. It re-derives each node's result
// types from the op table and compares, and checks the rules of block graphs (DESIGN.md §3):
//   - every input-to-output path passes exactly one iterator, one accumulator and one saver;
//   - omaps have no φ for a grid dim of size > 1 and no two grid dims on one output dim;
//   - splits divide their dims unless the iterator is masked; header values are positive.
// Each issue names the node (with its printed line) and the rule broken.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace morgana::ir {

struct VerifyIssue {
  int body = -1;     // -1: the kernel graph; otherwise the index of the block graph
  NodeId node = 0;   // the offending node in that graph (or the block op for header issues)
  std::string rule;  // short rule name: "shape", "level", "path", "omap", "header", "operands", "outputs", ...
  std::string message;
};

std::vector<VerifyIssue> verify(const Graph& g);

// Throws UserError listing every issue, each as "node N `printed line`: [rule] message".
void verify_or_throw(const Graph& g);
std::string format_issue(const Graph& g, const VerifyIssue& issue);

}  // namespace morgana::ir
