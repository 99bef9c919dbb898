// The result cache (search/cache.h) in a temporary $XDG_CACHE_HOME: misses, hits, damaged and stale entries,
// and what the key covers. Runs from the source root (the target files).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "search/cache.h"
#include "search/result_io.h"
#include "search/text_hash.h"
#include "targets/target.h"
#include "tests/common/golden.h"
#include "tests/search/synthetic_results.h"

namespace morgana::search {
namespace {

namespace fs = std::filesystem;

class Cache : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/morgana_cache_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    if (const char* old = std::getenv("XDG_CACHE_HOME")) old_xdg_ = old;
    setenv("XDG_CACHE_HOME", root_.c_str(), 1);
  }
  void TearDown() override {
    if (old_xdg_)
      setenv("XDG_CACHE_HOME", old_xdg_->c_str(), 1);
    else
      unsetenv("XDG_CACHE_HOME");
    fs::remove_all(root_);
  }

  fs::path entry(const std::string& key) const { return root_ / "morgana" / (key + ".result"); }

  SearchResult stored(const std::string& key) const {
    SearchResult r = testing::shard_result(0, 1);
    r.key = key;
    cache_store(r);
    return r;
  }

  fs::path root_;
  std::optional<std::string> old_xdg_;
};

const targets::Target& h200() {
  static const targets::Target t = targets::find_target("h200", "targets");
  return t;
}

TEST_F(Cache, MissThenStoreThenHit) {
  std::string key = cache_key(testing::kMatmulSpec, h200(), SearchOptions{});
  EXPECT_FALSE(cache_lookup(key));
  SearchResult r = stored(key);
  ASSERT_TRUE(fs::exists(entry(key)));
  std::optional<SearchResult> hit = cache_lookup(key);
  ASSERT_TRUE(hit);
  EXPECT_EQ(write_result(*hit), write_result(r));
  // Only the entry is left: the temporary file was renamed.
  EXPECT_EQ(std::distance(fs::directory_iterator(root_ / "morgana"), fs::directory_iterator()), 1);
}

// Two processes writing one key (two jobs of one search on a shared home folder) while a third reads it: every read
// is a miss or one of the two whole entries, never a damaged one, and one whole entry is left.
TEST_F(Cache, TwoProcessesWritingOneKeyLeaveOneWholeEntry) {
  const std::string key = "0000000000000000000000000000000a";
  SearchResult a = testing::shard_result(0, 1), b = testing::shard_result(0, 1);
  a.key = b.key = key;
  b.top.at(0).cost_us += 1;  // another answer, so a mix of the two would show
  const std::string text_a = write_result(a), text_b = write_result(b);
  std::vector<pid_t> writers;
  for (const SearchResult* r : {&a, &b}) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0; i < 200; ++i) cache_store(*r);
      _exit(0);
    }
    writers.push_back(pid);
  }
  int reads = 0;
  ::testing::internal::CaptureStderr();
  for (size_t running = writers.size(); running > 0;) {
    if (std::optional<SearchResult> hit = cache_lookup(key)) {
      ++reads;
      const std::string text = write_result(*hit);
      EXPECT_TRUE(text == text_a || text == text_b);
    }
    for (pid_t& pid : writers) {
      int status = 0;
      if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid) {
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        pid = 0;
        --running;
      }
    }
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "a reader saw a damaged entry";
  std::optional<SearchResult> last = cache_lookup(key);
  ASSERT_TRUE(last);
  EXPECT_TRUE(write_result(*last) == text_a || write_result(*last) == text_b);
  // No temporary file is left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(root_ / "morgana"), fs::directory_iterator()), 1);
  EXPECT_GT(reads, 0);
}

TEST_F(Cache, ATimedOutResultIsNotStored) {
  SearchResult r = testing::shard_result(0, 1);
  r.key = "00000000000000000000000000000001";
  r.stats.timed_out = true;
  cache_store(r);
  EXPECT_FALSE(fs::exists(entry(r.key)));
  EXPECT_FALSE(cache_lookup(r.key));
}

TEST_F(Cache, AResultWhoseChecksTheTimeLimitCutIsNotStored) {
  SearchResult r = testing::shard_result(0, 1);
  r.key = "00000000000000000000000000000003";
  r.stats.unverified_for_time = 2;
  cache_store(r);
  EXPECT_FALSE(fs::exists(entry(r.key)));
}

TEST_F(Cache, ADamagedEntryIsIgnoredAndRemoved) {
  std::string key = "00000000000000000000000000000002";
  stored(key);
  std::string text = morgana::testing::read_file(entry(key));
  std::ofstream(entry(key), std::ios::binary) << text.substr(0, text.size() / 2);
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(cache_lookup(key));
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("morgana: warning: damaged cache entry ignored and removed: "), std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_FALSE(fs::exists(entry(key)));
}

TEST_F(Cache, AStaleEntryIsIgnoredAndRemoved) {
  // Written by another version of morgana: same format, another made-by line (and so a fresh checksum).
  std::string key = "00000000000000000000000000000003";
  stored(key);
  std::string text = morgana::testing::read_file(entry(key));
  size_t at = text.find("made-by ");
  text.replace(at, text.find('\n', at) - at, "made-by 0.0.0-old");
  text.resize(text.rfind("checksum "));
  std::ofstream(entry(key), std::ios::binary) << text + "checksum " + hex64(hash_text(text)) + "\n";
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(cache_lookup(key));
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("stale cache entry"), std::string::npos) << err;
  EXPECT_NE(err.find("made by morgana 0.0.0-old"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(entry(key)));

  // Filed under another key.
  stored("00000000000000000000000000000004");
  fs::rename(entry("00000000000000000000000000000004"), entry(key));
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(cache_lookup(key));
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("stale cache entry"), std::string::npos);
}

TEST_F(Cache, NoUsableFolderMeansNoCache) {
  std::ofstream(root_ / "file") << "x";
  setenv("XDG_CACHE_HOME", (root_ / "file").c_str(), 1);  // a file where the folder should be
  EXPECT_FALSE(cache_dir());
  SearchResult r = testing::shard_result(0, 1);
  cache_store(r);  // silently nothing
  EXPECT_FALSE(cache_lookup(r.key));
}

TEST(CacheKey, CoversWhatChangesTheAnswerAndNothingElse) {
  const std::string spec = testing::kMatmulSpec;
  SearchOptions o;
  std::string k = cache_key(spec, h200(), o);
  EXPECT_EQ(k.size(), 32u);
  EXPECT_EQ(k.find_first_not_of("0123456789abcdef"), std::string::npos) << k;
  EXPECT_EQ(cache_key(spec, h200(), o), k) << "deterministic";

  SearchOptions same = o;
  same.threads = 13;
  same.time_limit_s = 5;
  EXPECT_EQ(cache_key(spec, h200(), same), k) << "threads and the time limit do not change the answer";

  auto differs = [&](auto change) {
    SearchOptions x = o;
    change(x);
    return cache_key(spec, h200(), x) != k;
  };
  EXPECT_TRUE(differs([](SearchOptions& x) { x.max_kernel_ops = 3; }));
  EXPECT_TRUE(differs([](SearchOptions& x) { x.max_block_ops = 11; }));
  EXPECT_TRUE(differs([](SearchOptions& x) { x.top = 4; }));
  EXPECT_TRUE(differs([](SearchOptions& x) { x.trials = 4; }));
  EXPECT_TRUE(differs([](SearchOptions& x) { x.seed = 2; }));
  EXPECT_TRUE(differs([](SearchOptions& x) { x.abstract_pruning = false; }));
  EXPECT_NE(cache_key(spec + " ", h200(), o), k);
  EXPECT_NE(cache_key(spec, targets::find_target("a100", "targets"), o), k);

  SearchOptions shard = o;
  shard.shard = {2, 4};
  std::string ks = cache_key(spec, h200(), shard);
  EXPECT_EQ(ks, k + "-shard-2-of-4");
  EXPECT_EQ(unsharded_key(ks), k);
  EXPECT_EQ(unsharded_key(k), k);
}

TEST(CacheKey, ChangesWithTheContentOfTheTargetFileAndItsBases) {
  char tmpl[] = "/tmp/morgana_cache_key_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  fs::path dir = tmpl;
  fs::copy_file("targets/cuda/h100.toml", dir / "h100.toml");
  fs::copy_file("targets/cuda/h200.toml", dir / "h200.toml");
  std::string before = cache_key(testing::kMatmulSpec, targets::find_target("h200", dir), SearchOptions{});
  EXPECT_EQ(before, cache_key(testing::kMatmulSpec, h200(), SearchOptions{}))
      << "the same bytes give the same key";
  std::ofstream(dir / "h100.toml", std::ios::app) << "# an edit of the base file\n";
  std::string after = cache_key(testing::kMatmulSpec, targets::find_target("h200", dir), SearchOptions{});
  EXPECT_NE(before, after);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace morgana::search
