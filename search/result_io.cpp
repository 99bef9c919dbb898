#include "search/result_io.h"

#include <charconv>
#include <limits>

#include "ir/diagnostic.h"
#include "ir/printer.h"
#include "search/text_hash.h"

namespace morgana::search {

namespace {

constexpr std::string_view kChecksum = "checksum";

// ---- writing ----

class Writer {
 public:
  // "name value": one line; the value must not hold a newline (every such field is a one-line text by
  // contract).
  void field(std::string_view name, std::string_view value) {
    MG_CHECK(value.find('\n') == std::string_view::npos,
             "result field '" + std::string(name) + "' spans lines");
    out_.append(name).append(" ").append(value).append("\n");
  }
  void number(std::string_view name, uint64_t v) { field(name, std::to_string(v)); }
  void number(std::string_view name, double v) { field(name, ir::format_number(v)); }
  void flag(std::string_view name, bool v) { field(name, v ? "true" : "false"); }
  // "name BYTES", the bytes, then a newline so that the next field starts a line whatever the text ends with.
  void block(std::string_view name, std::string_view text) {
    out_.append(name).append(" ").append(std::to_string(text.size())).append("\n").append(text).append("\n");
  }
  std::string finish() {
    field(kChecksum, hex64(hash_text(out_)));
    return std::move(out_);
  }

 private:
  std::string out_;
};

std::string ratio(uint64_t a, uint64_t b) {
  return std::to_string(a) + "/" + std::to_string(b);
}

// ---- reading ----

class Reader {
 public:
  Reader(std::string_view text, std::string_view where) : text_(text), where_(where) {}

  [[noreturn]] void fail(const std::string& message) const {
    throw UserError(message, {std::string(where_), line_ == 0 ? 1 : line_, 1});
  }

  bool at_end() const { return pos_ >= text_.size(); }

  // Whether the next line starts with `prefix` followed by a space.
  bool next_is(std::string_view prefix) const {
    std::string_view rest = text_.substr(pos_);
    return rest.starts_with(prefix) && rest.size() > prefix.size() && rest[prefix.size()] == ' ';
  }

  std::string_view line() {
    ++line_;
    if (at_end()) fail("unexpected end of file");
    size_t end = text_.find('\n', pos_);
    if (end == std::string_view::npos) fail("the last line has no newline (the file is truncated)");
    std::string_view l = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return l;
  }

  // The value of the next line, which must be "name value".
  std::string_view field(std::string_view name) {
    bool present = next_is(name);
    std::string_view l = line();
    if (!present) fail("expected '" + std::string(name) + " ...' but found '" + shorten(l) + "'");
    return l.substr(name.size() + 1);
  }

  template <class Int>
  Int integer(std::string_view name, std::string_view text, int base = 10) {
    Int v{};
    auto r = std::from_chars(text.data(), text.data() + text.size(), v, base);
    if (r.ec != std::errc() || r.ptr != text.data() + text.size() || text.empty())
      fail("'" + std::string(name) + "' needs an integer, not '" + shorten(text) + "'");
    return v;
  }
  template <class Int>
  Int integer(std::string_view name) {
    return integer<Int>(name, field(name));
  }

  double real(std::string_view name) {
    std::string_view text = field(name);
    double v = 0;
    auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    if (r.ec != std::errc() || r.ptr != text.data() + text.size() || text.empty())
      fail("'" + std::string(name) + "' needs a number, not '" + shorten(text) + "'");
    return v;
  }

  bool flag(std::string_view name) {
    std::string_view text = field(name);
    if (text != "true" && text != "false") fail("'" + std::string(name) + "' needs true or false");
    return text == "true";
  }

  // "a/b" with two unsigned integers.
  std::pair<uint64_t, uint64_t> pair(std::string_view name) {
    std::string_view text = field(name);
    size_t slash = text.find('/');
    if (slash == std::string_view::npos) fail("'" + std::string(name) + "' needs two numbers as A/B");
    return {integer<uint64_t>(name, text.substr(0, slash)), integer<uint64_t>(name, text.substr(slash + 1))};
  }

  std::string block(std::string_view name) {
    size_t bytes = integer<size_t>(name);
    if (bytes > text_.size() - pos_ || text_.size() - pos_ - bytes < 1 || text_[pos_ + bytes] != '\n')
      fail("the " + std::to_string(bytes) + " bytes of '" + std::string(name) + "' run past their end");
    std::string_view b = text_.substr(pos_, bytes);
    for (char c : b) line_ += c == '\n';
    pos_ += bytes + 1;
    // The block's own last line and the terminating newline are one line when the text ends without '\n'.
    if (!b.empty() && b.back() != '\n') ++line_;
    return std::string(b);
  }

 private:
  static std::string shorten(std::string_view s) {
    return s.size() > 60 ? std::string(s.substr(0, 60)) + "..." : std::string(s);
  }

  std::string_view text_;
  std::string_view where_;
  size_t pos_ = 0;
  uint32_t line_ = 0;  // of the line read last
};

int to_int(Reader& in, std::string_view name, uint64_t v) {
  if (v > static_cast<uint64_t>(std::numeric_limits<int>::max()))
    in.fail("'" + std::string(name) + "' is too large");
  return static_cast<int>(v);
}

}  // namespace

std::string write_result(const SearchResult& r) {
  Writer w;
  w.field(kResultMagic, std::to_string(kResultFormatVersion));
  w.field("made-by", MORGANA_VERSION);
  w.field("target", r.target);
  w.field("key", r.key);
  const SearchOptions& o = r.options;
  w.number("option time_limit_s", o.time_limit_s);
  w.number("option threads", static_cast<uint64_t>(o.threads));
  w.number("option max_kernel_ops", static_cast<uint64_t>(o.max_kernel_ops));
  w.number("option max_block_ops", static_cast<uint64_t>(o.max_block_ops));
  w.field("option shard", ratio(static_cast<uint64_t>(o.shard.index), static_cast<uint64_t>(o.shard.count)));
  w.number("option top", static_cast<uint64_t>(o.top));
  w.number("option trials", static_cast<uint64_t>(o.trials));
  w.number("option seed", o.seed);
  w.flag("option abstract_pruning", o.abstract_pruning);
  const SearchStats& s = r.stats;
  w.number("stat states", s.states);
  for (const auto& [rule, n] : s.pruned) {
    MG_CHECK(!rule.empty() && rule.find(' ') == std::string::npos,
             "a pruning rule name with a space: " + rule);
    w.number("stat pruned " + rule, n);
  }
  w.number("stat complete", s.complete);
  w.number("stat verified", s.verified);
  w.number("stat rejected", s.rejected);
  w.field("stat tasks", ratio(s.tasks_done, s.tasks_total));
  w.number("stat seconds", s.seconds);
  w.number("stat verify_seconds", s.verify_seconds);
  w.flag("stat timed_out", s.timed_out);
  w.number("stat unverified_for_time", s.unverified_for_time);
  w.block("spec", r.spec);
  w.number("candidates", static_cast<uint64_t>(r.top.size()));
  for (const RankedCandidate& c : r.top) {
    w.field("hash", hex64(c.hash));
    w.number("cost_us", c.cost_us);
    w.field("verification", c.verification);
    w.block("mugraph", c.mugraph);
    w.block("cost", c.cost);
  }
  return w.finish();
}

SearchResult read_result(std::string_view text, std::string_view where, std::string* made_by) {
  Reader in(text, where);
  // The version first: an older or newer format gets that message, not a checksum mismatch.
  if (!in.next_is(kResultMagic))
    in.fail("not a morgana search result (the first line is not '" + std::string(kResultMagic) + " N')");
  if (in.integer<int>(kResultMagic) != kResultFormatVersion)
    in.fail("search result format version is not " + std::to_string(kResultFormatVersion) +
            " (written by another version of morgana; search again)");
  size_t last = text.size() >= 2 ? text.rfind('\n', text.size() - 2) : std::string_view::npos;
  std::string_view tail = last == std::string_view::npos ? text : text.substr(last + 1);
  if (!tail.starts_with(std::string(kChecksum) + " ") || !text.ends_with('\n'))
    throw UserError("no checksum line at the end (the file is truncated)", {std::string(where), 0, 0});
  std::string_view body = text.substr(0, last + 1);
  if (tail.substr(kChecksum.size() + 1, 16) != hex64(hash_text(body)) || tail.size() != kChecksum.size() + 18)
    throw UserError("checksum mismatch (the file was changed or damaged after it was written)",
                    {std::string(where), 0, 0});

  SearchResult r;
  std::string version(in.field("made-by"));
  if (made_by) *made_by = version;
  r.target = in.field("target");
  r.key = in.field("key");
  SearchOptions& o = r.options;
  o.time_limit_s = in.real("option time_limit_s");
  o.threads = to_int(in, "threads", in.integer<uint64_t>("option threads"));
  o.max_kernel_ops = to_int(in, "max_kernel_ops", in.integer<uint64_t>("option max_kernel_ops"));
  o.max_block_ops = to_int(in, "max_block_ops", in.integer<uint64_t>("option max_block_ops"));
  auto [index, count] = in.pair("option shard");
  if (count < 1 || index >= count) in.fail("shard " + ratio(index, count) + " is not i/n with 0 <= i < n");
  o.shard = {to_int(in, "shard", index), to_int(in, "shard", count)};
  o.top = to_int(in, "top", in.integer<uint64_t>("option top"));
  o.trials = to_int(in, "trials", in.integer<uint64_t>("option trials"));
  o.seed = in.integer<uint64_t>("option seed");
  o.abstract_pruning = in.flag("option abstract_pruning");
  SearchStats& s = r.stats;
  s.states = in.integer<uint64_t>("stat states");
  while (in.next_is("stat pruned")) {
    std::string_view l = in.field("stat pruned");
    size_t space = l.find(' ');
    if (space == std::string_view::npos || space == 0) in.fail("'stat pruned' needs a rule and a count");
    std::string rule(l.substr(0, space));
    if (s.pruned.count(rule)) in.fail("pruning rule '" + rule + "' is listed twice");
    s.pruned[rule] = in.integer<uint64_t>("stat pruned", l.substr(space + 1));
  }
  s.complete = in.integer<uint64_t>("stat complete");
  s.verified = in.integer<uint64_t>("stat verified");
  s.rejected = in.integer<uint64_t>("stat rejected");
  std::tie(s.tasks_done, s.tasks_total) = in.pair("stat tasks");
  s.seconds = in.real("stat seconds");
  s.verify_seconds = in.real("stat verify_seconds");
  s.timed_out = in.flag("stat timed_out");
  s.unverified_for_time = in.integer<uint64_t>("stat unverified_for_time");
  r.spec = in.block("spec");
  uint64_t n = in.integer<uint64_t>("candidates");
  for (uint64_t i = 0; i < n; ++i) {
    RankedCandidate c;
    std::string_view hash = in.field("hash");
    if (hash.size() != 16 || hash.find_first_not_of("0123456789abcdef") != std::string_view::npos)
      in.fail("'hash' needs 16 lowercase hex digits");
    c.hash = in.integer<uint64_t>("hash", hash, 16);
    c.cost_us = in.real("cost_us");
    c.verification = in.field("verification");
    c.mugraph = in.block("mugraph");
    c.cost = in.block("cost");
    r.top.push_back(std::move(c));
  }
  in.field(kChecksum);  // verified above
  if (!in.at_end()) in.fail("text after the checksum line");
  return r;
}

}  // namespace morgana::search
