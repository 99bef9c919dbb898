#include "search/cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "ir/diagnostic.h"
#include "search/build_id.h"
#include "search/result_io.h"
#include "search/text_hash.h"

namespace morgana::search {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kShardSuffix = "-shard-";

std::optional<std::string> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

// Appends a labelled, length-prefixed part, so that no two different lists of parts give the same bytes.
void add_part(std::string& material, std::string_view label, std::string_view bytes) {
  material.append(label)
      .append(" ")
      .append(std::to_string(bytes.size()))
      .append(":")
      .append(bytes)
      .append("\n");
}

fs::path entry_path(const fs::path& dir, const std::string& key) {
  // The key is ours (hex digits and the shard suffix), so it is a plain file name.
  MG_CHECK(!key.empty() && key.find_first_of("/\\.") == std::string::npos, "bad cache key '" + key + "'");
  return dir / (key + ".result");
}

void warn(const std::string& line) {
  std::cerr << "morgana: warning: " << line << "\n";
}

}  // namespace

SearchOptions answer_options(const SearchOptions& options) {
  SearchOptions o = options;
  o.threads = SearchOptions{}.threads;
  o.time_limit_s = SearchOptions{}.time_limit_s;
  return o;
}

std::string cache_key(const std::string& canonical_spec, const targets::Target& target,
                      const SearchOptions& options) {
  std::string material;
  add_part(material, "spec", canonical_spec);
  std::vector<fs::path> files{target.file};
  files.insert(files.end(), target.bases.begin(), target.bases.end());
  for (const fs::path& f : files) {
    std::optional<std::string> content = f.empty() ? std::nullopt : read_bytes(f);
    if (!content)
      throw UserError("cannot read target file '" + f.string() + "' of target '" + target.identity.name +
                      "' to key the search cache");
    add_part(material, "target file", *content);
  }
  add_part(material, "morgana", MORGANA_VERSION);
  add_part(material, "build", MORGANA_BUILD_ID);
  add_part(material, "result format", std::to_string(kResultFormatVersion));
  const SearchOptions o = answer_options(options);
  std::string opts = "max_kernel_ops=" + std::to_string(o.max_kernel_ops) +
                     " max_block_ops=" + std::to_string(o.max_block_ops) + " top=" + std::to_string(o.top) +
                     " trials=" + std::to_string(o.trials) + " seed=" + std::to_string(o.seed) +
                     " abstract_pruning=" + (o.abstract_pruning ? "1" : "0");
  add_part(material, "options", opts);
  std::string key = hex64(hash_text(material, 1)) + hex64(hash_text(material, 2));
  if (o.shard.count > 1)
    key += std::string(kShardSuffix) + std::to_string(o.shard.index) + "-of-" + std::to_string(o.shard.count);
  return key;
}

std::string unsharded_key(const std::string& shard_key) {
  return shard_key.substr(0, shard_key.find(kShardSuffix));
}

std::optional<fs::path> cache_dir() {
  fs::path base;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  // The XDG base-directory spec says a relative $XDG_CACHE_HOME is to be ignored.
  if (xdg && *xdg && fs::path(xdg).is_absolute())
    base = xdg;
  else if (home && *home)
    base = fs::path(home) / ".cache";
  else
    return std::nullopt;
  fs::path dir = base / "morgana";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  return dir;
}

std::optional<SearchResult> cache_lookup(const std::string& key) {
  std::optional<fs::path> dir = cache_dir();
  if (!dir) return std::nullopt;
  fs::path file = entry_path(*dir, key);
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  std::optional<std::string> text = read_bytes(file);
  if (!text) return std::nullopt;  // unreadable (permissions): leave it to its owner
  std::string problem, made_by;
  std::optional<SearchResult> r;
  try {
    r = read_result(*text, file.string(), &made_by);
    if (r->key != key || made_by != MORGANA_VERSION)
      problem = "stale cache entry " + file.string() + " (made by morgana " + made_by + " for key " + r->key +
                "): ignored and removed";
  } catch (const UserError& e) {
    problem = "damaged cache entry ignored and removed: " + e.render();
  }
  if (problem.empty()) return r;
  warn(problem);
  fs::remove(file, ec);
  return std::nullopt;
}

void cache_discard(const std::string& key) {
  std::optional<fs::path> dir = cache_dir();
  if (!dir) return;
  std::error_code ec;
  fs::remove(entry_path(*dir, key), ec);
}

void cache_store(const SearchResult& result) {
  // Depends on timing: a later run with more time must search (or verify) again.
  if (result.stats.timed_out || result.stats.unverified_for_time) return;
  std::optional<fs::path> dir = cache_dir();
  if (!dir) return;
  fs::path file = entry_path(*dir, result.key);
  // A name no other process or thread uses, in the same folder so that the rename cannot cross file systems.
  static std::atomic<uint64_t> counter{0};
  fs::path tmp = *dir / (result.key + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++));
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::binary);
    out << write_result(result);
    out.close();
    if (!out) {
      warn("cannot write the cache entry " + tmp.string() + "; the result is not cached");
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, file, ec);
  if (ec) {
    warn("cannot store the cache entry " + file.string() + ": " + ec.message());
    fs::remove(tmp, ec);
  }
}

}  // namespace morgana::search
