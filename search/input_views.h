// Transposed inputs (docs/search.md, "Transposed inputs"). The generator builds candidates over the spec's inputs,
// and a transpose is a view of its operand's memory, so the search sees each transpose of a spec input as an input
// of its own, of the view's type (dims and strides swapped); each candidate found gets the transposes back, over
// the original inputs, before it is reported. Checking candidates against the viewed spec is sound: agreeing for
// independent inputs implies agreeing when one input is the other's transpose.
#pragma once

#include <optional>
#include <vector>

#include "ir/block_rules.h"
#include "ir/graph.h"

namespace morgana::search {

struct InputViews {
  ir::Graph spec;                      // the inputs read other than through a transpose, then one per transpose
  std::vector<ir::TensorId> kept;      // those inputs of the original spec, in order
  std::vector<ir::NodeId> transposes;  // the transposes of inputs (nodes of the original spec), in order
  // Per input of `spec`: a view of a kept input is that input's memory, transposed (the cost model loads a tile of
  // it once where a block reads both, ir::equal_iters); every other input is its own.
  ir::InputAliases aliases;
};

// None when no op of `spec` transposes one of its inputs.
std::optional<InputViews> view_inputs(const ir::Graph& spec);

// `candidate` (a program over views.spec's inputs) over `spec`'s inputs again: the transposes first, under the spec's
// names, then the candidate's ops under its own names. (An input read only through transposes is not an input of the
// viewed spec: the generator would build candidates over it for nothing.)
ir::Graph restore_views(const ir::Graph& candidate, const ir::Graph& spec, const InputViews& views);

}  // namespace morgana::search
