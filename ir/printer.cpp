#include "ir/printer.h"

#include <cctype>
#include <charconv>
#include <unordered_set>

#include "ir/diagnostic.h"
#include "ir/lexer.h"

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

// One printed line and what it came from in the source, so that print_with_comments can put each comment back
// beside the statement it was written with: a node's line (`line`, its source line), a closing brace (the next '}'
// of the source, in order), or a kernel's header (the next 'kernel' that opens a program).
struct PrintedLine {
  enum class Kind : uint8_t { node, close, header };
  std::string text;
  Kind kind = Kind::node;
  uint32_t line = 0;  // Kind::node: the source line of the node (0: unknown)
};

void print_block_body(const Graph& body, const std::vector<std::string>& outer_names,
                      std::span<const TensorId> block_operands, const std::string& indent,
                      std::vector<PrintedLine>& out) {
  std::vector<std::string> names = printed_names(body);
  std::vector<std::string> operand_names;
  for (TensorId t : block_operands) operand_names.push_back(outer_names[t]);
  for (NodeId id = 0; id < body.nodes().size(); ++id)
    out.push_back({indent + print_node(body, body.node(id), names, operand_names), PrintedLine::Kind::node,
                   body.loc(id).line});
}

void print_graph_body(const Graph& g, const std::string& indent, std::vector<PrintedLine>& out) {
  std::vector<std::string> names = printed_names(g);
  std::vector<std::string> returns;
  uint32_t return_line = 0;
  for (NodeId id = 0; id < g.nodes().size(); ++id) {
    const Node& n = g.node(id);
    if (n.op == OpCode::input) continue;
    if (n.op == OpCode::output) {
      if (returns.empty()) return_line = g.loc(id).line;
      returns.push_back(names[g.operands(n)[0]]);
      continue;
    }
    out.push_back({indent + print_node(g, n, names), PrintedLine::Kind::node, g.loc(id).line});
    if (n.op == OpCode::block) {
      out.back().text += " {";
      print_block_body(g.body(n), names, g.operands(n), indent + "  ", out);
      out.push_back({indent + "}", PrintedLine::Kind::close, 0});
    }
  }
  std::string ret = indent + "return";
  for (size_t i = 0; i < returns.size(); ++i) ret += (i ? ", " : " ") + returns[i];
  out.push_back({ret, PrintedLine::Kind::node, return_line});
}

void print_lines(const Graph& g, std::vector<PrintedLine>& out) {
  MG_CHECK(!g.is_block(), "print a kernel graph (block graphs print inside their block op)");
  std::string header = "kernel " + g.name() + "(";
  std::vector<std::string> names = printed_names(g);
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    TensorId t = g.inputs()[i];
    header += (i ? ", " : "") + names[t] + ": " + g.type(t).str();
  }
  out.push_back({header + ")" + print_for_targets(g) + " {", PrintedLine::Kind::header, 0});
  print_graph_body(g, "  ", out);
  out.push_back({"}", PrintedLine::Kind::close, 0});
}

std::vector<PrintedLine> print_lines(const Module& m) {
  std::vector<PrintedLine> out;
  for (size_t i = 0; i < m.programs.size(); ++i) {
    if (i) out.push_back({"", PrintedLine::Kind::node, 0});  // a blank line between programs
    print_lines(m.programs[i], out);
  }
  return out;
}

std::string join(const std::vector<PrintedLine>& lines) {
  std::string s;
  for (const PrintedLine& l : lines) s += l.text + "\n";
  return s;
}

// A comment of the source: '#' to the end of its line (the language has no strings, so every '#' starts one).
struct Comment {
  uint32_t line = 0;
  std::string text;       // from '#', trailing whitespace removed
  bool trailing = false;  // code precedes it on its line
};

std::vector<Comment> comments_of(std::string_view source) {
  std::vector<Comment> out;
  uint32_t line = 1;
  size_t start = 0;
  while (start <= source.size()) {
    size_t end = source.find('\n', start);
    if (end == std::string_view::npos) end = source.size();
    std::string_view l = source.substr(start, end - start);
    if (size_t hash = l.find('#'); hash != std::string_view::npos) {
      std::string_view text = l.substr(hash);
      while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
      const bool code_before = l.substr(0, hash).find_first_not_of(" \t\r") != std::string_view::npos;
      out.push_back({line, std::string(text), code_before});
    }
    if (end == source.size()) break;
    start = end + 1;
    ++line;
  }
  return out;
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
  std::vector<PrintedLine> lines;
  print_lines(g, lines);
  return join(lines);
}

std::string print(const Module& m) { return join(print_lines(m)); }

std::string print_with_comments(const Module& m, std::string_view source) {
  std::vector<PrintedLine> lines = print_lines(m);
  std::vector<Comment> comments = comments_of(source);
  if (comments.empty()) return join(lines);
  // The source lines of the headers and closing braces, in order: a program opens at each 'kernel' met outside any
  // braces, and the printed braces close in the order the source's do.
  std::vector<uint32_t> headers, closes;
  int depth = 0;
  for (const Token& t : lex(source, "")) {
    if (t.kind == Tok::Punct && t.text == "{") ++depth;
    if (t.kind == Tok::Punct && t.text == "}") {
      --depth;
      closes.push_back(t.line);
    }
    if (t.kind == Tok::Ident && t.text == "kernel" && depth == 0 &&
        (headers.empty() || (!closes.empty() && closes.back() >= headers.back())))
      headers.push_back(t.line);
  }
  size_t next_header = 0, next_close = 0;
  uint32_t last = 0;
  for (PrintedLine& l : lines) {
    if (l.kind == PrintedLine::Kind::header && next_header < headers.size()) l.line = headers[next_header++];
    if (l.kind == PrintedLine::Kind::close && next_close < closes.size()) l.line = closes[next_close++];
    if (l.line == 0) l.line = last;  // unknown (the blank line between programs): where the last line was
    last = l.line;
  }
  // A comment alone on its line goes just before the first printed line from a later source line, indented like it
  // (like the block's statements when that line closes a block); a trailing one goes at the end of the last printed
  // line from its source line or before. Comments after everything end the text.
  std::vector<std::vector<std::string>> before(lines.size() + 1);
  for (const Comment& c : comments) {
    if (c.trailing) {
      size_t at = 0;
      for (size_t i = 0; i < lines.size(); ++i)
        if (lines[i].line <= c.line && !lines[i].text.empty()) at = i;
      lines[at].text += "  " + c.text;
      continue;
    }
    size_t at = lines.size();
    for (size_t i = 0; i < lines.size(); ++i)
      if (lines[i].line > c.line && !lines[i].text.empty()) {
        at = i;
        break;
      }
    std::string indent;
    if (at < lines.size()) {
      indent = lines[at].text.substr(0, lines[at].text.find_first_not_of(' '));
      if (lines[at].kind == PrintedLine::Kind::close) indent += "  ";
    }
    before[at].push_back(indent + c.text);
  }
  std::string s;
  for (size_t i = 0; i <= lines.size(); ++i) {
    for (const std::string& c : before[i]) s += c + "\n";
    if (i < lines.size()) s += lines[i].text + "\n";
  }
  return s;
}

}  // namespace morgana::ir
