#include "ir/printer.h"

#include <charconv>
#include <unordered_set>

#include "ir/diagnostic.h"

namespace morgana::ir {

std::string format_number(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  MG_CHECK(r.ec == std::errc(), "to_chars failed");
  return std::string(buf, r.ptr);
}

std::vector<std::string> printed_names(const Graph& g) {
  std::unordered_set<std::string> used;
  for (size_t t = 0; t < g.num_tensors(); ++t)
    if (!g.name(static_cast<TensorId>(t)).empty()) used.insert(g.name(static_cast<TensorId>(t)));
  std::vector<std::string> names(g.num_tensors());
  for (size_t t = 0; t < g.num_tensors(); ++t) {
    const std::string& n = g.name(static_cast<TensorId>(t));
    if (!n.empty()) {
      names[t] = n;
      continue;
    }
    std::string fresh = "t" + std::to_string(t);
    while (used.count(fresh)) fresh += "_";
    used.insert(fresh);
    names[t] = fresh;
  }
  return names;
}

namespace {

std::string map_str(const std::array<int8_t, kGridDims>& m) {
  std::string s = "[";
  for (int g = 0; g < kGridDims; ++g) {
    if (g) s += ',';
    int8_t d = m[static_cast<size_t>(g)];
    s += d == kPhi ? std::string("-") : std::to_string(d);
  }
  return s + "]";
}

// Attributes to print: the required ones always, the others when they differ from their default.
std::string attrs_str(OpCode op, const Attrs& a) {
  const OpInfo& info = op_info(op);
  const Attrs def;
  std::string s;
  for (const AttrName& an : attr_names()) {
    if (!(info.attrs & an.key)) continue;
    bool required = (info.required & an.key) != 0;
    std::string v;
    switch (an.key) {
      case kAttrDim:
        if (required || a.dim != def.dim) v = std::to_string(a.dim);
        break;
      case kAttrTo:
        if (required || a.to != def.to) v = std::to_string(a.to);
        break;
      case kAttrS:
        if (required || a.s != def.s) v = format_number(a.s);
        break;
      case kAttrEps:
        if (required || a.eps != def.eps) v = format_number(a.eps);
        break;
      case kAttrImap:
      case kAttrOmap:
        v = map_str(a.map);
        break;
      case kAttrFmap:
        if (required || a.fmap != kPhi) v = a.fmap == kPhi ? "-" : std::to_string(a.fmap);
        break;
      case kAttrMask:
        if (a.mask) v = "true";
        break;
      case kAttrShape:
        if (a.shape_rank) {
          v = "[";
          for (int i = 0; i < a.shape_rank; ++i) v += (i ? "," : "") + std::to_string(a.shape[static_cast<size_t>(i)]);
          v += "]";
        }
        break;
    }
    if (!v.empty()) s += ", " + std::string(an.name) + "=" + v;
  }
  return s;
}

void print_block_header(const Graph& body, std::string& out) {
  const BlockParams& p = body.block_params();
  out += " grid=[" + std::to_string(p.grid[0]) + "," + std::to_string(p.grid[1]) + "," + std::to_string(p.grid[2]) +
         "] threads=" + std::to_string(p.threads) + " loop=" + std::to_string(p.loop);
}

void print_block_body(const Graph& body, const std::vector<std::string>& outer_names,
                      std::span<const TensorId> block_operands, const std::string& indent, std::string& out) {
  std::vector<std::string> names = printed_names(body);
  std::vector<std::string> operand_names;
  for (TensorId t : block_operands) operand_names.push_back(outer_names[t]);
  for (const Node& n : body.nodes()) out += indent + print_node(body, n, names, operand_names) + "\n";
}

void print_graph_body(const Graph& g, const std::string& indent, std::string& out) {
  std::vector<std::string> names = printed_names(g);
  std::vector<std::string> returns;
  for (const Node& n : g.nodes()) {
    if (n.op == OpCode::input) continue;
    if (n.op == OpCode::output) {
      returns.push_back(names[g.operands(n)[0]]);
      continue;
    }
    out += indent + print_node(g, n, names);
    if (n.op == OpCode::block) {
      out += " {\n";
      print_block_body(g.body(n), names, g.operands(n), indent + "  ", out);
      out += indent + "}";
    }
    out += "\n";
  }
  out += indent + "return";
  for (size_t i = 0; i < returns.size(); ++i) out += (i ? ", " : " ") + returns[i];
  out += "\n";
}

}  // namespace

std::string print_call(const Graph& g, const Node& n, const std::vector<std::string>& names,
                       const std::vector<std::string>& operand_names) {
  std::string s = std::string(op_name(n.op)) + "(";
  if (n.op == OpCode::iter) {
    s += n.attrs.index < operand_names.size() ? operand_names[n.attrs.index] : "#" + std::to_string(n.attrs.index);
    return s + attrs_str(n.op, n.attrs) + ")";
  }
  auto ops = g.operands(n);
  for (size_t i = 0; i < ops.size(); ++i) s += (i ? ", " : "") + names[ops[i]];
  s += attrs_str(n.op, n.attrs) + ")";
  if (n.op == OpCode::block) print_block_header(g.body(n), s);
  return s;
}

std::string print_node(const Graph& g, const Node& n, const std::vector<std::string>& names,
                       const std::vector<std::string>& operand_names) {
  if (n.op == OpCode::save) return print_call(g, n, names);
  if (n.op == OpCode::output) return "return " + names[g.operands(n)[0]];
  std::string s;
  for (int i = 0; i < n.num_results; ++i) s += (i ? ", " : "") + names[g.result(n, i)];
  return s + " = " + print_call(g, n, names, operand_names);
}

std::string print_for_targets(const Graph& g) {
  std::string s;
  for (size_t i = 0; i < g.for_targets().size(); ++i) s += (i ? ", " : " for [") + g.for_targets()[i];
  return s.empty() ? s : s + "]";
}

std::string print(const Graph& g) {
  MG_CHECK(!g.is_block(), "print a kernel graph (block graphs print inside their block op)");
  std::string out = "kernel " + g.name() + "(";
  std::vector<std::string> names = printed_names(g);
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    TensorId t = g.inputs()[i];
    out += (i ? ", " : "") + names[t] + ": " + g.type(t).str();
  }
  out += ")" + print_for_targets(g) + " {\n";
  print_graph_body(g, "  ", out);
  out += "}\n";
  return out;
}

std::string print(const Module& m) {
  std::string out;
  for (size_t i = 0; i < m.programs.size(); ++i) {
    if (i) out += "\n";
    out += print(m.programs[i]);
  }
  return out;
}

}  // namespace morgana::ir
