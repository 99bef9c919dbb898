#include "frontend/report.h"

#include <cstdio>

#include "ir/printer.h"

namespace morgana::frontend {

namespace {

std::string typed_results(const ir::Graph& g, const ir::Node& n, const std::vector<std::string>& names) {
  std::string s;
  for (int i = 0; i < n.num_results; ++i) {
    ir::TensorId t = g.result(n, i);
    s += (i ? ", " : "") + names[t] + ": " + g.type(t).str();
  }
  return s;
}

void report_graph(const ir::Graph& g, std::string& out) {
  std::vector<std::string> names = ir::printed_names(g);
  out += "kernel " + program_label(g) + "\n";
  for (const ir::Node& n : g.nodes()) {
    if (n.op == ir::OpCode::input) {
      out += "  " + typed_results(g, n, names) + " (input)\n";
    } else if (n.op == ir::OpCode::output) {
      ir::TensorId t = g.operands(n)[0];
      out += "  return " + names[t] + ": " + g.type(t).str() + "\n";
    } else {
      out += "  " + typed_results(g, n, names) + " = " + ir::print_call(g, n, names) + "\n";
    }
    if (n.op != ir::OpCode::block) continue;
    const ir::Graph& body = g.body(n);
    std::vector<std::string> body_names = ir::printed_names(body);
    std::vector<std::string> operand_names;
    for (ir::TensorId t : g.operands(n)) operand_names.push_back(names[t]);
    size_t saved = 0;
    for (const ir::Node& b : body.nodes()) {
      std::string lhs = b.op == ir::OpCode::save
                            ? names[g.result(n, static_cast<int>(saved++))] + ": " + body.type(body.result(b)).str()
                            : typed_results(body, b, body_names);
      out += "    " + lhs + " = " + ir::print_call(body, b, body_names, operand_names) + "\n";
    }
  }
}

std::string fmt_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6e", v);
  return buf;
}

}  // namespace

std::string program_label(const ir::Graph& g) { return g.name() + ir::print_for_targets(g); }

std::string check_report(const ir::Module& m) {
  std::string out;
  for (const ir::Graph& g : m.programs) report_graph(g, out);
  return out;
}

std::string eval_report(const ir::Module& m, const EvalOptions& opts) {
  std::string out;
  for (const ir::Graph& g : m.programs) {
    std::vector<verify::FloatArray> inputs = verify::random_inputs(g, opts.seed);
    std::vector<verify::FloatArray> outputs = verify::eval_float(g, inputs, opts.precision);
    out += "kernel " + program_label(g) + " (seed " + std::to_string(opts.seed) + ", " +
           (opts.precision == verify::Precision::f64 ? "f64" : "f32") + " accumulation)\n";
    std::vector<std::string> names = ir::printed_names(g);
    for (size_t i = 0; i < outputs.size(); ++i) {
      verify::Checksum c = verify::checksum(outputs[i]);
      out += "  " + names[g.outputs()[i]] + ": " + g.type(g.outputs()[i]).str() + " sum=" + fmt_double(c.sum) +
             " abs_sum=" + fmt_double(c.abs_sum) + "\n";
    }
  }
  return out;
}

}  // namespace morgana::frontend
