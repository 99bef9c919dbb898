#include "ir/parser.h"

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "ir/lexer.h"
#include "ir/verify.h"

namespace morgana::ir {

namespace {

// A parsed attribute value, before it is checked against the op's schema.
struct Value {
  enum Kind { Number, Ident, Phi, List } kind = Number;
  std::string text;           // Number / Ident
  std::vector<Token> items;   // List: Number or Phi tokens
  Token at;
};

struct Arg {
  std::optional<std::string> key;  // keyword argument when set
  Token key_at;                    // where the key is written
  Value value;
};

struct Scope {
  std::map<std::string, TensorId, std::less<>> ids;
  std::map<std::string, SourceLoc, std::less<>> defs;
};

class Parser {
 public:
  Parser(std::vector<Token> toks, std::string file) : toks_(std::move(toks)), file_(std::move(file)) {}

  Module module() {
    Module m;
    std::vector<SourceLoc> where;  // of each program's 'kernel'
    if (peek().kind == Tok::End) error(peek(), "expected 'kernel' but the file is empty");
    while (peek().kind != Tok::End) {
      const Token& kw = peek();
      Graph g = kernel();
      for (size_t i = 0; i < m.programs.size(); ++i)
        if (m.programs[i].name() == g.name()) check_distinct_targets(m.programs[i], where[i], g, kw);
      where.push_back(loc(kw));
      m.programs.push_back(std::move(g));
    }
    return m;
  }

 private:
  // Two programs may share a name only when each has a `for` list and no target is in both (so that a name and a
  // target pick one program, as in a bundle).
  void check_distinct_targets(const Graph& earlier, const SourceLoc& earlier_at, const Graph& g,
                              const Token& kw) const {
    std::string defined = "kernel '" + g.name() + "' is already defined at " + earlier_at.str();
    if (earlier.for_targets().empty() && g.for_targets().empty()) error(kw, defined);
    if (earlier.for_targets().empty() || g.for_targets().empty())
      error(kw, defined + " (kernels may share a name only when each has a 'for' list of targets and no target is "
                          "in two of them)");
    for (const std::string& t : g.for_targets())
      if (serves_target(earlier, t))
        error(kw, "kernel '" + g.name() + "' for target '" + t + "' is already defined at " + earlier_at.str());
  }

  // `for [h200, h100]` after a kernel's parameters: the targets the program is for.
  std::vector<std::string> target_list() {
    const Token& open = expect('[', "to open the list of targets after 'for'");
    if (is_punct(peek(), ']')) error(open, "a 'for' list names at least one target, e.g. for [h200]");
    std::vector<std::string> names;
    do {
      const Token& t = expect_ident("a target name");
      if (std::find(names.begin(), names.end(), t.text) != names.end())
        error(t, "target '" + t.text + "' is listed twice");
      names.push_back(t.text);
    } while (accept(','));
    expect(']', "to close the list of targets");
    return names;
  }

  // --- tokens ---
  const Token& peek(size_t ahead = 0) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < toks_.size() - 1) ++pos_;
    return t;
  }
  bool is_punct(const Token& t, char c) const { return t.kind == Tok::Punct && t.text[0] == c; }
  bool accept(char c) {
    if (!is_punct(peek(), c)) return false;
    next();
    return true;
  }
  const Token& expect(char c, std::string_view what = {}) {
    if (!is_punct(peek(), c))
      error(peek(), "expected '" + std::string(1, c) + "'" + (what.empty() ? "" : " " + std::string(what)) +
                        " but found " + describe(peek()));
    return next();
  }
  const Token& expect_ident(std::string_view what) {
    if (peek().kind != Tok::Ident) error(peek(), "expected " + std::string(what) + " but found " + describe(peek()));
    return next();
  }
  bool accept_keyword(std::string_view kw) {
    if (peek().kind != Tok::Ident || peek().text != kw) return false;
    next();
    return true;
  }
  SourceLoc loc(const Token& t) const { return {file_, t.line, t.column}; }
  [[noreturn]] void error(const Token& t, const std::string& msg) const { throw UserError(msg, loc(t)); }

  int64_t to_int(const Token& t, std::string_view what) const {
    int64_t v = 0;
    auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (t.kind != Tok::Number || r.ec != std::errc() || r.ptr != t.text.data() + t.text.size())
      error(t, "expected an integer for " + std::string(what) + " but found " + describe(t));
    return v;
  }
  double to_double(const Token& t, std::string_view what) const {
    double v = 0;
    auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (t.kind != Tok::Number || r.ec != std::errc() || r.ptr != t.text.data() + t.text.size())
      error(t, "expected a number for " + std::string(what) + " but found " + describe(t));
    return v;
  }

  // --- types ---
  TensorType type() {
    const Token& dt = expect_ident("an element type (f16, bf16, f32)");
    std::optional<DType> d = parse_dtype(dt.text);
    if (!d) error(dt, "unknown element type '" + dt.text + "' (expected f16, bf16 or f32)");
    expect('[', "to open the shape");
    std::vector<int64_t> dims;
    do {
      const Token& n = peek();
      int64_t v = to_int(next(), "a dimension");
      if (v < 1) error(n, "dimension must be >= 1, got " + std::to_string(v));
      dims.push_back(v);
    } while (accept(','));
    if (dims.size() > static_cast<size_t>(kMaxRank))
      error(dt, "rank " + std::to_string(dims.size()) + " exceeds the maximum of " + std::to_string(kMaxRank));
    expect(']', "to close the shape");
    TensorType t = TensorType::make(*d, dims);
    if (std::string problem = t.addressable_problem(); !problem.empty()) error(dt, t.str() + ": " + problem);
    if (is_punct(peek(), '{')) {
      const Token& open = next();
      for (int i = 0; i < t.rank; ++i) {
        if (i) expect(',');
        t.strides[static_cast<size_t>(i)] = to_int(next(), "a stride");
      }
      expect('}', "to close the strides");
      for (int i = 0; i < t.rank; ++i)
        if (t.strides[static_cast<size_t>(i)] < 1) error(open, "strides must be >= 1");
    }
    return t;
  }

  // --- kernels ---
  Graph kernel() {
    if (!accept_keyword("kernel")) error(peek(), "expected 'kernel' but found " + describe(peek()));
    const Token& name = expect_ident("a kernel name");
    Graph g;
    g.set_name(name.text);
    Scope scope;
    expect('(', "to open the parameter list");
    if (!is_punct(peek(), ')')) {
      do {
        const Token& p = expect_ident("a parameter name");
        expect(':', "after parameter '" + p.text + "'");
        TensorType t = type();
        define(scope, p, g.add_input(t, p.text));
        g.set_loc(static_cast<NodeId>(g.nodes().size() - 1), loc(p));
      } while (accept(','));
    }
    expect(')', "to close the parameter list");
    if (accept_keyword("for")) g.set_for_targets(target_list());
    const Token& open = expect('{', "to open the kernel body");
    std::vector<SourceLoc> node_locs;
    for (NodeId id = 0; id < g.nodes().size(); ++id) node_locs.push_back(g.loc(id));
    bool returned = false;
    while (!is_punct(peek(), '}')) {
      if (peek().kind == Tok::End)
        error(peek(), "missing '}' at the end of kernel '" + name.text + "' (its '{' is at " + loc(open).str() + ")");
      if (returned) error(peek(), "statement after 'return'");
      const Token& start = peek();
      if (accept_keyword("return")) {
        do {
          const Token& r = expect_ident("a tensor name to return");
          g.add_output(lookup(scope, r));
          node_locs.push_back(loc(r));
        } while (accept(','));
        returned = true;
        continue;
      }
      statement(g, scope, node_locs);
      (void)start;
    }
    const Token& close = next();
    if (!returned) error(close, "kernel '" + name.text + "' has no 'return'");
    check_verified(g, node_locs, {});
    record_locs(g, node_locs);
    return g;
  }

  void define(Scope& scope, const Token& name, TensorId t, Graph* g = nullptr) {
    if (auto it = scope.defs.find(name.text); it != scope.defs.end())
      error(name, "'" + name.text + "' is already defined at " + it->second.str());
    scope.ids[name.text] = t;
    scope.defs[name.text] = loc(name);
    if (g) g->set_name(t, name.text);
  }

  TensorId lookup(const Scope& scope, const Token& name) const {
    if (auto it = scope.ids.find(name.text); it != scope.ids.end()) return it->second;
    std::string hint;
    size_t best = SIZE_MAX;
    for (const auto& [n, id] : scope.ids)
      if (likely_typo(name.text, n) && edit_distance(name.text, n) < best) {
        best = edit_distance(name.text, n);
        hint = "; did you mean '" + n + "'?";
      }
    error(name, "'" + name.text + "' is not defined" + hint);
  }

  // Names the results of a statement, after checking that there are as many names as results: "<what> 2 results
  // but 1 names are given".
  void bind(Graph& g, Scope& scope, const std::vector<Token>& names, const std::vector<TensorId>& results,
            const std::string& what, const std::string& noun) {
    if (names.size() != results.size())
      error(names[0], what + " " + std::to_string(results.size()) + " " + noun + (results.size() == 1 ? "" : "s") +
                          " but " + std::to_string(names.size()) + " names are given");
    for (size_t i = 0; i < names.size(); ++i) define(scope, names[i], results[i], &g);
  }

  std::vector<Token> lhs() {
    std::vector<Token> names;
    do names.push_back(expect_ident("a result name")); while (accept(','));
    expect('=', "after the result name" + std::string(names.size() > 1 ? "s" : ""));
    return names;
  }

  OpCode op_name_token(const Token& t, Level level) const {
    std::optional<OpCode> op = op_by_name(t.text);
    if (!op) {
      std::string hint;
      size_t best = SIZE_MAX;
      for (const OpInfo& i : all_ops())
        if (size_t d = edit_distance(i.name, t.text); d < best && (i.levels & level) && likely_typo(t.text, i.name)) {
          best = d;
          hint = "; did you mean '" + std::string(i.name) + "'?";
        }
      error(t, "unknown op '" + t.text + "'" + hint);
    }
    const OpInfo& info = op_info(*op);
    if (info.kind == OpKind::Input || info.kind == OpKind::Output)
      error(t, "'" + t.text + "' is not written as a call; " +
                   (info.kind == OpKind::Input ? "declare inputs as kernel parameters" : "use 'return'"));
    if (!(info.levels & level))
      error(t, "'" + t.text + "' is only allowed in a " + (level == kKernelLevel ? "block graph" : "kernel graph"));
    return *op;
  }

  std::vector<Arg> call_args() {
    expect('(', "to open the argument list");
    std::vector<Arg> args;
    if (accept(')')) return args;
    do {
      Arg a;
      if (peek().kind == Tok::Ident && is_punct(peek(1), '=')) {
        a.key_at = next();
        a.key = a.key_at.text;
        next();
      }
      a.value = value();
      args.push_back(std::move(a));
    } while (accept(','));
    expect(')', "to close the argument list");
    return args;
  }

  Value value() {
    Value v;
    v.at = peek();
    if (accept('[')) {
      v.kind = Value::List;
      if (!is_punct(peek(), ']')) {
        do {
          if (peek().kind != Tok::Number && peek().kind != Tok::Phi)
            error(peek(), "expected a number or '-' in the list but found " + describe(peek()));
          v.items.push_back(next());
        } while (accept(','));
      }
      expect(']', "to close the list");
      return v;
    }
    const Token& t = next();
    switch (t.kind) {
      case Tok::Number: v.kind = Value::Number; break;
      case Tok::Ident: v.kind = Value::Ident; break;
      case Tok::Phi: v.kind = Value::Phi; break;
      default: error(t, "expected a value but found " + describe(t));
    }
    v.text = t.text;
    return v;
  }

  // Fills `attrs` from the keyword arguments, checking them against the op's row of the op table.
  // `operand0` is the type of the first operand (for dim ranges), when the op has one.
  Attrs attributes(OpCode op, const Token& op_tok, const std::vector<Arg>& args, const TensorType* operand0) {
    int rank0 = operand0 ? operand0->rank : 0;
    const OpInfo& info = op_info(op);
    Attrs a;
    uint32_t given = 0;
    for (const Arg& arg : args) {
      uint32_t key = 0;
      if (!arg.key) {
        if (arg.value.kind != Value::Number) continue;  // operands are handled by the caller
        if (!(info.attrs & kAttrS) || (given & kAttrS))
          error(arg.value.at, "'" + std::string(info.name) + "' takes no positional number");
        key = kAttrS;
      } else {
        for (const AttrName& an : attr_names())
          if (an.name == *arg.key) key = an.key;
        if (!key || !(info.attrs & key)) {
          std::string accepted, hint;
          for (const AttrName& an : attr_names())
            if (info.attrs & an.key) {
              accepted += (accepted.empty() ? "" : ", ") + std::string(an.name);
              if (likely_typo(*arg.key, an.name) || an.name.starts_with(*arg.key) || arg.key->starts_with(an.name))
                hint = "; did you mean '" + std::string(an.name) + "'?";
            }
          error(arg.key_at, "'" + std::string(info.name) + "' has no attribute '" + *arg.key + "'" +
                                (accepted.empty() ? " (it takes none)" : " (it takes " + accepted + ")") + hint);
        }
      }
      if (given & key) error(arg.key ? arg.key_at : arg.value.at, "attribute '" + attr_text(key) + "' is given twice");
      given |= key;
      const Value& v = arg.value;
      auto need = [&](Value::Kind k, const char* what) {
        if (v.kind != k) error(v.at, "attribute '" + attr_text(key) + "' needs " + what);
      };
      switch (key) {
        case kAttrDim: {
          need(Value::Number, "an integer");
          int64_t d = to_int(v.at, "'dim'");
          if (d < 0 && rank0 > 0) d += rank0;
          if (rank0 > 0 && (d < 0 || d >= rank0))
            error(v.at, "'" + std::string(info.name) + "': dim " + v.text + " is out of range for " +
                            operand0->str() + " (valid: 0.." + std::to_string(rank0 - 1) + ", or -" +
                            std::to_string(rank0) + "..-1 from the end)");
          a.dim = static_cast<int32_t>(d);
          break;
        }
        case kAttrTo:
          need(Value::Number, "an integer");
          a.to = to_int(v.at, "'to'");
          if (a.to < 1) error(v.at, "'to' must be >= 1");
          break;
        case kAttrS:
          need(Value::Number, "a number");
          a.s = to_double(v.at, "'s'");
          break;
        case kAttrEps:
          need(Value::Number, "a number");
          a.eps = to_double(v.at, "'eps'");
          break;
        case kAttrImap:
        case kAttrOmap: {
          need(Value::List, "a list like [0,-,-] (one entry per grid dim x, y, z; '-' for φ)");
          if (v.items.empty() || v.items.size() > static_cast<size_t>(kGridDims))
            error(v.at, "'" + attr_text(key) + "' needs 1 to " + std::to_string(kGridDims) +
                            " entries (one per grid dim x, y, z; missing ones are '-'), got " +
                            std::to_string(v.items.size()));
          for (size_t g = 0; g < v.items.size(); ++g)
            a.map[g] = map_entry(v.items[g], attr_text(key));
          break;
        }
        case kAttrFmap:
          if (v.kind == Value::Phi) {
            a.fmap = kPhi;
          } else {
            need(Value::Number, "a dim or '-'");
            a.fmap = map_entry(v.at, "fmap");
          }
          break;
        case kAttrMask:
          if (v.kind != Value::Ident || (v.text != "true" && v.text != "false"))
            error(v.at, "attribute 'mask' needs true or false");
          a.mask = v.text == "true";
          break;
        case kAttrShape:
          need(Value::List, "a list of extents");
          if (v.items.size() > static_cast<size_t>(kMaxRank)) error(v.at, "'shape' has too many entries");
          a.shape_rank = static_cast<uint8_t>(v.items.size());
          for (size_t i = 0; i < v.items.size(); ++i) a.shape[i] = to_int(v.items[i], "a shape extent");
          break;
        default:
          break;
      }
    }
    uint32_t missing = info.required & ~given;
    if (missing)
      error(op_tok, "'" + std::string(info.name) + "' needs attribute '" + attr_text(missing & -missing) + "'");
    return a;
  }

  static std::string attr_text(uint32_t key) {
    for (const AttrName& an : attr_names())
      if (an.key == key) return std::string(an.name);
    return "?";
  }

  int8_t map_entry(const Token& t, const std::string& what) const {
    if (t.kind == Tok::Phi) return kPhi;
    int64_t d = to_int(t, "an entry of '" + what + "'");
    if (d < 0 || d >= kMaxRank) error(t, "'" + what + "' entry " + t.text + " is not a valid dim");
    return static_cast<int8_t>(d);
  }

  std::vector<TensorId> operands(const Scope& scope, const std::vector<Arg>& args, size_t skip = 0) {
    std::vector<TensorId> ops;
    size_t seen = 0;
    for (const Arg& a : args) {
      if (a.key) continue;
      if (a.value.kind == Value::Number) continue;
      if (a.value.kind != Value::Ident) error(a.value.at, "expected an operand name but found " + describe(a.value.at));
      if (seen++ < skip) continue;
      Token t = a.value.at;
      ops.push_back(lookup(scope, t));
    }
    return ops;
  }

  // `lhs = op(args)` in a kernel graph, or a block op with its body.
  void statement(Graph& g, Scope& scope, std::vector<SourceLoc>& node_locs) {
    std::vector<Token> names = lhs();
    const Token& op_tok = expect_ident("an op name");
    OpCode op = op_name_token(op_tok, kKernelLevel);
    std::vector<Arg> args = call_args();
    if (op == OpCode::block) {
      block(g, scope, names, op_tok, args, node_locs);
      return;
    }
    std::vector<TensorId> ops = operands(scope, args);
    Attrs attrs = attributes(op, op_tok, args, ops.empty() ? nullptr : &g.type(ops[0]));
    std::vector<TensorId> results;
    try {
      results = g.add(op, ops, attrs);
    } catch (const UserError& e) {
      error(op_tok, e.message());
    }
    node_locs.push_back(loc(op_tok));
    bind(g, scope, names, results, "'" + op_tok.text + "' has", "result");
  }

  void block(Graph& g, Scope& scope, const std::vector<Token>& names, const Token& op_tok,
             const std::vector<Arg>& args, std::vector<SourceLoc>& node_locs) {
    std::vector<TensorId> ops;
    std::map<std::string, uint32_t, std::less<>> operand_index;
    for (const Arg& a : args) {
      if (a.key || a.value.kind != Value::Ident)
        error(a.value.at, "a block takes only tensor names as operands");
      if (operand_index.count(a.value.text)) error(a.value.at, "'" + a.value.text + "' is listed twice");
      operand_index[a.value.text] = static_cast<uint32_t>(ops.size());
      ops.push_back(lookup(scope, a.value.at));
    }
    BlockParams p;
    uint32_t seen = 0;
    while (peek().kind == Tok::Ident) {
      const Token& key = next();
      expect('=', "after '" + key.text + "'");
      int which = key.text == "grid" ? 1 : key.text == "threads" ? 2 : key.text == "loop" ? 4 : 0;
      if (!which) error(key, "unknown block setting '" + key.text + "' (expected grid, threads or loop)");
      if (seen & static_cast<uint32_t>(which)) error(key, "'" + key.text + "' is given twice");
      seen |= static_cast<uint32_t>(which);
      if (which == 1) {
        Value v = value();
        if (v.kind != Value::List || v.items.empty() || v.items.size() > static_cast<size_t>(kGridDims))
          error(v.at, "'grid' needs a list of 1 to " + std::to_string(kGridDims) + " sizes, like [64,16,1]");
        for (size_t i = 0; i < v.items.size(); ++i) {
          p.grid[i] = to_int(v.items[i], "a grid size");
          if (p.grid[i] < 1) error(v.items[i], "grid sizes must be >= 1");
        }
      } else {
        const Token& n = peek();
        int64_t v = to_int(next(), "'" + key.text + "'");
        if (v < 1) error(n, "'" + key.text + "' must be >= 1");
        (which == 2 ? p.threads : p.loop) = v;
      }
    }
    std::vector<TensorType> types;
    for (TensorId t : ops) types.push_back(g.type(t));
    Graph body = Graph::make_block(p, types);
    std::vector<SourceLoc> body_locs;
    Scope local;
    const Token& open = expect('{', "to open the block body");
    while (!accept('}')) {
      if (peek().kind == Tok::End)
        error(peek(), "missing '}' at the end of the block body (its '{' is at " + loc(open).str() + ")");
      block_statement(body, local, operand_index, body_locs);
    }
    check_verified(body, body_locs, loc(op_tok));
    record_locs(body, body_locs);
    std::vector<TensorId> results;
    try {
      results = g.add_block(ops, std::move(body));
    } catch (const UserError& e) {
      error(op_tok, e.message());
    }
    node_locs.push_back(loc(op_tok));
    bind(g, scope, names, results, "the block saves", "tensor");
  }

  void block_statement(Graph& body, Scope& local, const std::map<std::string, uint32_t, std::less<>>& operand_index,
                       std::vector<SourceLoc>& locs) {
    std::vector<Token> names;
    if (!(peek().kind == Tok::Ident && peek().text == "save" && is_punct(peek(1), '('))) names = lhs();
    const Token& op_tok = expect_ident("an op name");
    OpCode op = op_name_token(op_tok, kBlockLevel);
    std::vector<Arg> args = call_args();
    std::vector<TensorId> results;
    if (op == OpCode::save && !names.empty()) error(names[0], "'save' has no result to name; write save(x, omap=[...])");
    if (op != OpCode::save && names.empty()) error(op_tok, "expected a result name before '" + op_tok.text + "'");
    if (op == OpCode::iter) {
      if (args.empty() || args[0].key || args[0].value.kind != Value::Ident)
        error(op_tok, "'iter' needs the block operand it reads as its first argument");
      const Token& src = args[0].value.at;
      auto it = operand_index.find(src.text);
      if (it == operand_index.end())
        error(src, "'" + src.text + "' is not an operand of this block; list it in block(...)");
      if (args.size() > 1 && !args[1].key) error(args[1].value.at, "'iter' takes one operand");
      Attrs a = attributes(op, op_tok, args, nullptr);
      try {
        results = {body.add_iter(it->second, a.map, a.fmap, a.mask)};
      } catch (const UserError& e) {
        error(op_tok, e.message());
      }
    } else {
      std::vector<TensorId> ops = operands(local, args);
      Attrs attrs = attributes(op, op_tok, args, ops.empty() ? nullptr : &body.type(ops[0]));
      try {
        results = body.add(op, ops, attrs);
      } catch (const UserError& e) {
        error(op_tok, e.message());
      }
    }
    locs.push_back(loc(op_tok));
    if (op == OpCode::save) return;
    bind(body, local, names, results, "'" + op_tok.text + "' has", "result");
  }

  // Keeps each node's source position in the graph, for the stages after parsing (lowering names the line a
  // generated statement came from).
  static void record_locs(Graph& g, const std::vector<SourceLoc>& locs) {
    for (size_t i = 0; i < locs.size() && i < g.nodes().size(); ++i) g.set_loc(static_cast<NodeId>(i), locs[i]);
  }

  // Runs the structural verifier on a freshly parsed graph and reports the first issue at its node.
  void check_verified(const Graph& g, const std::vector<SourceLoc>& locs, const SourceLoc& fallback) const {
    std::vector<VerifyIssue> issues = verify(g);
    if (issues.empty()) return;
    const VerifyIssue& first = issues.front();
    SourceLoc where = first.body < 0 && first.node < locs.size() ? locs[first.node]
                      : g.is_block() && first.node < locs.size() ? locs[first.node]
                                                                  : fallback;
    std::string msg = first.message + " [" + first.rule + "]";
    if (issues.size() > 1) msg += " (and " + std::to_string(issues.size() - 1) + " more)";
    throw UserError(msg, where);
  }

  std::vector<Token> toks_;
  std::string file_;
  size_t pos_ = 0;
};

}  // namespace

Module parse_module(std::string_view src, const std::string& file) {
  return Parser(lex(src, file), file).module();
}

std::string read_source(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw UserError("cannot read: it is a folder", {path.string(), 0, 0});
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const bool missing = !std::filesystem::exists(path, ec);
    throw UserError(std::string("cannot open file: ") + (missing ? "no such file" : std::strerror(errno ? errno : EIO)),
                    {path.string(), 0, 0});
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw UserError("cannot read file", {path.string(), 0, 0});
  return ss.str();
}

Module parse_file(const std::filesystem::path& path) { return parse_module(read_source(path), path.string()); }

}  // namespace morgana::ir
