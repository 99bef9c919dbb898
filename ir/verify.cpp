#include "ir/verify.h"

#include "ir/diagnostic.h"
#include "ir/printer.h"

namespace morgana::ir {

namespace {

// Where a block-graph tensor stands relative to the for-loop: produced from iterators without an accumulator yet
// (Body), after exactly one accumulator (Epilogue), or a saver's result (Saved).
enum class Stage : uint8_t { Body, Epilogue, Saved };

class Verifier {
 public:
  explicit Verifier(std::vector<VerifyIssue>& issues) : issues_(issues) {}

  void graph(const Graph& g, int body_index) {
    body_ = body_index;
    if (g.is_block()) header(g);
    for (NodeId id = 0; id < g.nodes().size(); ++id) node(g, id);
    if (g.outputs().empty())
      report(g.nodes().empty() ? 0 : static_cast<NodeId>(g.nodes().size() - 1), "outputs",
             g.is_block() ? "the block graph saves nothing" : "the kernel graph returns nothing");
    if (g.is_block()) paths(g);
    if (!g.is_block()) {
      for (NodeId id = 0; id < g.nodes().size(); ++id) {
        const Node& n = g.node(id);
        if (n.op == OpCode::block) {
          int saved = body_;
          graph(g.body(n), static_cast<int>(n.attrs.index));
          body_ = saved;
        }
      }
    }
  }

 private:
  void report(NodeId n, std::string rule, std::string msg) {
    issues_.push_back({body_, n, std::move(rule), std::move(msg)});
  }

  void header(const Graph& g) {
    const BlockParams& p = g.block_params();
    for (int i = 0; i < kGridDims; ++i)
      if (p.grid[static_cast<size_t>(i)] < 1) report(0, "header", "grid sizes must be >= 1");
    if (p.threads < 1) report(0, "header", "threads must be >= 1");
    if (p.loop < 1) report(0, "header", "loop must be >= 1");
  }

  void node(const Graph& g, NodeId id) {
    const Node& n = g.node(id);
    const OpInfo& info = op_info(n.op);
    if (!(info.levels & g.level())) {
      report(id, "level", "'" + std::string(info.name) + "' is not allowed in a " +
                              (g.is_block() ? "block graph" : "kernel graph"));
      return;
    }
    std::vector<TensorType> in;
    for (TensorId t : g.operands(n)) {
      if (t >= n.results_begin) {
        report(id, "operands", "uses a tensor defined after it");
        return;
      }
      in.push_back(g.type(t));
    }
    if (n.op == OpCode::input) return;
    try {
      std::vector<TensorType> want =
          infer_types(n.op, in, n.attrs, g.is_block() ? &g : nullptr, n.op == OpCode::block ? &g.body(n) : nullptr);
      if (want.size() != n.num_results) {
        report(id, "shape", "has " + std::to_string(n.num_results) + " results, the op table says " +
                                std::to_string(want.size()));
        return;
      }
      for (int i = 0; i < n.num_results; ++i)
        if (!(want[static_cast<size_t>(i)] == g.type(g.result(n, i))))
          report(id, "shape", "result " + std::to_string(i) + " has type " + g.type(g.result(n, i)).str() +
                                  " but its operands give " + want[static_cast<size_t>(i)].str());
    } catch (const UserError& e) {
      report(id, "shape", e.message());
    }
  }

  // Every input-to-output path passes exactly one iterator, one accumulator and one saver. In a DAG built from
  // iterators this is a per-node stage check: an accumulator takes Body values, a saver takes Epilogue values, and
  // no op mixes stages.
  void paths(const Graph& g) {
    std::vector<std::string> names;
    auto name = [&](TensorId t) {
      if (names.empty()) names = printed_names(g);  // only on the error path
      return "'" + names[t] + "'";
    };
    std::vector<Stage> stage(g.num_tensors(), Stage::Body);
    std::vector<bool> used(g.num_tensors(), false);
    for (NodeId id = 0; id < g.nodes().size(); ++id) {
      const Node& n = g.node(id);
      const OpInfo& info = op_info(n.op);
      auto ops = g.operands(n);
      for (TensorId t : ops) used[t] = true;
      Stage s = Stage::Body;
      for (TensorId t : ops) {
        if (stage[t] == Stage::Saved) report(id, "path", "uses the result of a saver; savers end a path");
        if (t != ops[0] && stage[t] != stage[ops[0]]) {
          TensorId in_loop = stage[t] == Stage::Body ? t : ops[0], after = stage[t] == Stage::Body ? ops[0] : t;
          report(id, "path", "mixes " + name(in_loop) + ", computed inside the for-loop, with " + name(after) +
                                 ", computed after an accumulator");
        }
      }
      if (!ops.empty()) s = stage[ops[0]];
      if (info.kind == OpKind::Accum) {
        if (s != Stage::Body)
          report(id, "path", "accumulates " + name(ops[0]) + ", which already passed an accumulator");
        s = Stage::Epilogue;
      } else if (info.kind == OpKind::Save) {
        if (s == Stage::Body)
          report(id, "path", "saves " + name(ops[0]) +
                                 ", which passed no accumulator; accumulate it first (acc_sum, acc_max)");
        s = Stage::Saved;
      }
      for (int i = 0; i < n.num_results; ++i) stage[g.result(n, i)] = s;
    }
    for (NodeId id = 0; id < g.nodes().size(); ++id) {
      const Node& n = g.node(id);
      if (n.op == OpCode::save) continue;
      for (int i = 0; i < n.num_results; ++i)
        if (!used[g.result(n, i)])
          report(id, "path", n.op == OpCode::iter ? "input iterator " + name(g.result(n, i)) + " is never used"
                                                  : name(g.result(n, i)) + " reaches no saver");
    }
  }

  std::vector<VerifyIssue>& issues_;
  int body_ = -1;
};

}  // namespace

std::vector<VerifyIssue> verify(const Graph& g) {
  std::vector<VerifyIssue> issues;
  Verifier(issues).graph(g, g.is_block() ? 0 : -1);
  return issues;
}

std::string format_issue(const Graph& g, const VerifyIssue& issue) {
  const Graph& where = issue.body < 0 || g.is_block() ? g : g.bodies()[static_cast<size_t>(issue.body)];
  std::string loc = issue.body < 0 ? "" : "block graph " + std::to_string(issue.body) + ", ";
  std::string line;
  if (issue.node < where.nodes().size()) line = " `" + print_node(where, where.node(issue.node), printed_names(where)) + "`";
  return loc + "node " + std::to_string(issue.node) + line + ": [" + issue.rule + "] " + issue.message;
}

void verify_or_throw(const Graph& g) {
  std::vector<VerifyIssue> issues = verify(g);
  if (issues.empty()) return;
  std::string msg = "the graph is malformed:";
  for (const VerifyIssue& i : issues) msg += "\n  " + format_issue(g, i);
  throw UserError(msg);
}

}  // namespace morgana::ir
