// The text form of every IR level (docs/spec-language.md). print(parse(x)) == x for any printed x.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace morgana::ir {

std::string print(const Module& m);
std::string print(const Graph& kernel_graph);

// print(m) with the comments of `source`, the text m was parsed from, put back where they were written (`morgana
// fmt`): a comment on a line of its own goes before the statement, closing brace or kernel that follows it, indented
// like that line (like the block's statements before a closing brace); a comment after code goes at the end of that
// statement's printed line, two spaces after it; comments after the last kernel end the text. No comment is lost,
// and a text printed so prints the same again.
std::string print_with_comments(const Module& m, std::string_view source);

// Names used when printing `g`: the tensor's own name, or a fresh one ("t7") that collides with nothing.
std::vector<std::string> printed_names(const Graph& g);

// The right-hand side of a node as the printer writes it, e.g. "softmax(A, dim=2)"; a block op with its header but
// without its body. An iter names its block operand from `operand_names` (the block op's operands as named in the
// enclosing graph), or "#index" when none are given.
std::string print_call(const Graph& g, const Node& n, const std::vector<std::string>& names,
                       const std::vector<std::string>& operand_names = {});
// The whole statement, e.g. "S = softmax(A, dim=2)" or "save(o, omap=[0,-,-])".
std::string print_node(const Graph& g, const Node& n, const std::vector<std::string>& names,
                       const std::vector<std::string>& operand_names = {});

// " for [h200, h100]" for a kernel graph with a target list, else "".
std::string print_for_targets(const Graph& g);

// Exact shortest text for a double that parses back to the same value.
std::string format_number(double v);

}  // namespace morgana::ir
