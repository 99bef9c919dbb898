// Fuzz target: search result files (search/result_io.h), as a cache hit and `morgana merge` read them. The input
// is one result file, or several (shards for merge) separated by lines "%%shard". Each file's checksum line is
// recomputed first, as an attacker who edits a file would do (the checksum catches damage, not intent), so that the
// reader's fields and the checks behind it see the mutations.
//   one file:  read_result, then recheck_result as a cache hit does (search/recheck.h) with the spec the file
//              holds and the target it names, the best candidate alone kept;
//   several:   frontend::merge_shards, what `morgana merge` runs (each shard priced again, the merged list checked).
// Whatever is accepted must then be what it claims: a result read back writes out to the same text, and an answer
// that passed its re-verification is equivalent to the spec in one more full exact check on another seed.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "frontend/optimize.h"
#include "ir/diagnostic.h"
#include "ir/parser.h"
#include "search/recheck.h"
#include "search/result_io.h"
#include "search/text_hash.h"
#include "tests/fuzz/fuzz_support.h"
#include "verify/equivalence.h"

using namespace morgana;

namespace {

constexpr std::string_view kShardSeparator = "%%shard\n";
constexpr std::string_view kChecksum = "checksum ";

// The file with its last line replaced by the right checksum of everything before it.
std::string reseal(std::string_view text) {
  std::string body(text);
  size_t line = body.rfind('\n', body.size() >= 2 ? body.size() - 2 : 0);
  size_t last = line == std::string::npos ? 0 : line + 1;
  if (std::string_view(body).substr(last).starts_with(kChecksum)) body.resize(last);
  if (!body.empty() && body.back() != '\n') body += '\n';
  return body + std::string(kChecksum) + search::hex64(search::hash_text(body)) + "\n";
}

std::vector<std::string> shard_texts(std::string_view input) {
  std::vector<std::string> out;
  for (;;) {
    size_t at = input.find(kShardSeparator);
    out.push_back(reseal(input.substr(0, at)));
    if (at == std::string_view::npos) return out;
    input.remove_prefix(at + kShardSeparator.size());
  }
}

bool small_enough(const search::SearchResult& r, const ir::Graph& spec) {
  if (!fuzz::small_enough_to_interpret(spec)) return false;
  for (const search::RankedCandidate& c : r.top) {
    // A candidate that does not parse is refused by the recheck before any interpreter runs.
    try {
      for (const ir::Graph& g : ir::parse_module(c.mugraph, "candidate").programs)
        if (!fuzz::small_enough_to_interpret(g)) return false;
    } catch (const UserError&) {
    }
  }
  return true;
}

void confirm(const ir::Graph& spec, const search::SearchResult& r) {
  if (!r.found()) return;
  const ir::Graph best = std::move(ir::parse_module(r.top[0].mugraph, "best").programs.at(0));
  verify::Verdict v = verify::equivalent(spec, best, {.trials = 1, .seed = 0x5eed, .full = true});
  if (v.kind == verify::Verdict::Different || v.kind == verify::Verdict::InterfaceMismatch)
    fuzz::finding("a re-verified answer is not equivalent to its spec: " + v.str() + "\n" + r.top[0].mugraph);
}

// The spec a file holds, when it is one program (a cache hit checks the user's spec instead, which the key ties to
// the file's; the harness has only the file's).
std::optional<ir::Graph> spec_of(const search::SearchResult& r) {
  ir::Module m = ir::parse_module(r.spec, "the file's spec");
  if (m.programs.size() != 1) return std::nullopt;
  return std::move(m.programs[0]);
}

void cache_hit(const std::string& text) {
  search::SearchResult r = search::read_result(text, "cache entry");
  // The writer's text is what the reader reads back exactly (the input itself may spell numbers otherwise).
  const std::string written = search::write_result(r);
  if (search::write_result(search::read_result(written, "rewritten")) != written)
    fuzz::finding("a result read back does not survive a rewrite");
  std::optional<ir::Graph> spec_program = spec_of(r);
  if (!spec_program) return;
  const ir::Graph& spec = *spec_program;
  if (!small_enough(r, spec)) return;
  const targets::Target target = targets::find_target(r.target, fuzz::source_targets_dir());
  if (search::recheck_result(spec, target, r, {.keep_others = false}).empty()) confirm(spec, r);
}

void merge(const std::vector<std::string>& texts) {
  std::vector<frontend::ShardText> shards;
  for (size_t i = 0; i < texts.size(); ++i) {
    shards.push_back({"shard" + std::to_string(i), texts[i]});
    search::SearchResult r = search::read_result(texts[i], shards.back().name);
    std::optional<ir::Graph> spec = spec_of(r);
    if (spec && !small_enough(r, *spec)) return;
  }
  for (const search::SearchResult& m : frontend::merge_shards(shards, fuzz::source_targets_dir())) {
    if (std::optional<ir::Graph> spec = spec_of(m)) confirm(*spec, m);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> texts = shard_texts(fuzz::as_text(data, size));
  try {
    if (texts.size() == 1)
      cache_hit(texts[0]);
    else
      merge(texts);
  } catch (const UserError&) {
    // Refused with a message naming the file (or entry) and what is wrong: the answer to a bad file.
  }
  return 0;
}
