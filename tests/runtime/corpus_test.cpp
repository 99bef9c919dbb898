// The bundle reader against several thousand damaged and hostile files, made deterministically from valid
// bundles: every truncation, every single bit flip, random multi-bit flips and byte overwrites, header and
// table fields set to extreme values, manifest fields set to extreme values with the checksum made right
// again (so the manifest decoder sees them), shuffled sections, swapped and copied table entries, and random
// bytes. Each must give a valid bundle or a one-line error, never a crash; CI runs this under
// AddressSanitizer and UBSan (scripts/test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>

#include "tests/runtime/samples.h"

namespace morgana::bundle {
namespace {

using namespace samples;

struct Rng {
  uint64_t state;
  uint64_t next() {  // splitmix64
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
};

enum class Expect { anything, error, original };

// Reads each file, checks the outcome, and keeps counts.
class Corpus {
 public:
  explicit Corpus(Bundle original) : original_(with_checksums(std::move(original))) {}

  void check(const std::string& category, const Bytes& file, Expect expect) {
    ++files_;
    ++by_category_[category];
    // An exact-size heap copy, so that AddressSanitizer sees a read one byte past the end (a vector may have
    // spare capacity behind its last element).
    std::unique_ptr<uint8_t[]> exact(new uint8_t[file.size()]);
    std::copy(file.begin(), file.end(), exact.get());
    Result r = read_bundle(std::span<const uint8_t>(exact.get(), file.size()));
    if (r.ok()) {
      ++accepted_;
      if (expect == Expect::error) report(category, file, "accepted, but the file is damaged");
      if (expect == Expect::original && *r.bundle != original_)
        report(category, file, "read a different bundle");
      // What the reader accepts, the writer accepts too, and it reads back the same.
      try {
        Result again = read_bundle(write_bundle(*r.bundle));
        if (!again.ok() || *again.bundle != *r.bundle) report(category, file, "does not survive a rewrite");
      } catch (const std::exception& e) {
        report(category, file, std::string("the writer refuses what the reader accepted: ") + e.what());
      }
      return;
    }
    const std::string& e = r.error;
    if (expect == Expect::original) report(category, file, "rejected: " + e);
    if (e.empty() || e.find('\n') != std::string::npos || e.starts_with("internal error") ||
        e.starts_with("out of memory"))
      report(category, file, "unclear error: '" + e + "'");
    ++errors_[shape_of(e)];
  }

  size_t files() const { return files_; }

  void summary() const {
    std::printf("%zu files: %zu accepted, %zu rejected\n", files_, accepted_, files_ - accepted_);
    for (const auto& [category, n] : by_category_) std::printf("  %6zu  %s\n", n, category.c_str());
    std::printf("%zu kinds of error message (numbers elided), most frequent first:\n", errors_.size());
    std::vector<std::pair<size_t, std::string>> kinds;
    for (const auto& [shape, n] : errors_) kinds.emplace_back(n, shape);
    std::sort(kinds.rbegin(), kinds.rend());
    for (size_t i = 0; i < kinds.size() && i < 40; ++i)
      std::printf("  %6zu  %s\n", kinds[i].first, kinds[i].second.c_str());
  }

 private:
  void report(const std::string& category, const Bytes& file, const std::string& what) {
    if (++failures_ <= 20)
      ADD_FAILURE() << category << " (" << file.size() << " bytes, file " << files_ << "): " << what;
  }

  // The message with every number replaced by N, for counting kinds of error.
  static std::string shape_of(const std::string& e) {
    std::string s;
    for (size_t i = 0; i < e.size(); ++i) {
      if (e[i] >= '0' && e[i] <= '9') {
        if (s.empty() || s.back() != 'N') s += 'N';
      } else {
        s += e[i];
      }
    }
    return s.substr(0, 100);
  }

  Bundle original_;
  size_t files_ = 0, accepted_ = 0, failures_ = 0;
  std::map<std::string, size_t> by_category_;
  std::map<std::string, size_t> errors_;
};

struct SectionView {
  uint32_t kind, id;
  uint64_t offset, length;
};

std::vector<SectionView> sections_of(const Bytes& f) {
  std::vector<SectionView> s;
  for (uint32_t i = 0; i < get_u32(f, kSectionCountAt); ++i)
    s.push_back({get_u32(f, entry_at(i) + kKindAt), get_u32(f, entry_at(i) + kIdAt),
                 get_u64(f, entry_at(i) + kOffsetAt), get_u64(f, entry_at(i) + kLengthAt)});
  return s;
}

// The same sections laid out in the order `order` (indices into the table), the table itself unchanged but
// for the offsets.
Bytes relayout(const Bytes& f, const std::vector<size_t>& order) {
  std::vector<SectionView> s = sections_of(f);
  size_t at = (32 + 32 * s.size() + 15) / 16 * 16;
  Bytes out(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(32 + 32 * s.size()));
  out.resize(at, 0);
  for (size_t i : order) {
    at = (out.size() + 15) / 16 * 16;
    out.resize(at, 0);
    set_u64(out, entry_at(i) + kOffsetAt, at);
    out.insert(out.end(), f.begin() + static_cast<std::ptrdiff_t>(s[i].offset),
               f.begin() + static_cast<std::ptrdiff_t>(s[i].offset + s[i].length));
  }
  set_u64(out, kFileBytesAt, out.size());
  return out;
}

// The same file with its table entries in the order `order`.
Bytes reorder_table(const Bytes& f, const std::vector<size_t>& order) {
  Bytes out = f;
  for (size_t k = 0; k < order.size(); ++k)
    std::copy(f.begin() + static_cast<std::ptrdiff_t>(entry_at(order[k])),
              f.begin() + static_cast<std::ptrdiff_t>(entry_at(order[k]) + 32),
              out.begin() + static_cast<std::ptrdiff_t>(entry_at(k)));
  return out;
}

const uint64_t kExtremes[] = {0,          1,          0x7f,        0xff,       0x7fffffff,
                              0x80000000, 0xffffffff, 0x100000000, 1ull << 62, ~0ull >> 1,
                              1ull << 63, ~0ull - 1,  ~0ull};

TEST(BundleCorpus, DamagedAndHostileFilesNeverCrash) {
  const Bytes small = write_bundle(tiny());
  const Bytes big = write_bundle(multi());
  Corpus tiny_corpus(tiny()), multi_corpus(multi());
  Rng rng{20250101};

  // Every truncation of the small bundle, as cut and with the header's file size made to agree.
  for (size_t n = 0; n < small.size(); ++n) {
    Bytes f(small.begin(), small.begin() + static_cast<std::ptrdiff_t>(n));
    tiny_corpus.check("truncation", f, Expect::error);
    if (n >= 32) {
      set_u64(f, kFileBytesAt, n);
      tiny_corpus.check("truncation, file size patched", f, Expect::error);
    }
  }
  for (size_t n = 0; n < big.size(); n += 5)
    multi_corpus.check("truncation", Bytes(big.begin(), big.begin() + static_cast<std::ptrdiff_t>(n)),
                       Expect::error);

  // Every single bit flip of the small bundle is caught: every byte is checked or under a checksum.
  for (size_t bit = 0; bit < small.size() * 8; ++bit) {
    Bytes f = small;
    f[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    tiny_corpus.check("single bit flip", f, Expect::error);
  }

  for (int i = 0; i < 600; ++i) {
    Bytes f = big;
    size_t flips = 2 + rng.below(15);
    for (size_t k = 0; k < flips; ++k) f[rng.below(f.size())] ^= static_cast<uint8_t>(1u << rng.below(8));
    multi_corpus.check("multi bit flip", f, Expect::anything);
  }
  for (int i = 0; i < 600; ++i) {
    Bytes f = big;
    size_t n = 1 + rng.below(8);
    for (size_t k = 0; k < n; ++k) f[rng.below(f.size())] = static_cast<uint8_t>(rng.next());
    multi_corpus.check("random byte overwrite", f, Expect::anything);
  }

  // Header and section table fields set to extreme values.
  std::vector<std::pair<size_t, int>> fields = {
      {kVersionAt, 4}, {kSectionCountAt, 4}, {kFileBytesAt, 8}, {kFlagsAt, 4}, {kReservedAt, 4}};
  for (size_t s = 0; s < sections_of(big).size(); ++s)
    for (auto [at, width] : std::vector<std::pair<size_t, int>>{
             {kKindAt, 4}, {kIdAt, 4}, {kOffsetAt, 8}, {kLengthAt, 8}, {kChecksumAt, 8}})
      fields.push_back({entry_at(s) + at, width});
  for (auto [at, width] : fields) {
    for (uint64_t v : kExtremes) {
      Bytes f = big;
      if (width == 4)
        set_u32(f, at, static_cast<uint32_t>(v));
      else
        set_u64(f, at, v);
      multi_corpus.check("header or table field = extreme", f, Expect::anything);
      if (width == 8) {  // and near the file's own size
        for (uint64_t near : {big.size() - 1, big.size(), big.size() + 1}) {
          set_u64(f, at, near);
          multi_corpus.check("header or table field = extreme", f, Expect::anything);
        }
      }
    }
  }

  // The small bundle with its manifest last, so that a read past the manifest's end is a read past the
  // file's.
  const Bytes manifest_last = relayout(small, {1, 0});
  ASSERT_TRUE(read_bundle(manifest_last).ok());

  // The manifest cut short at every length (section length, file size and checksum made to agree).
  {
    SectionView m = sections_of(manifest_last)[0];
    for (size_t len = 0; len < m.length; ++len) {
      Bytes f(manifest_last.begin(), manifest_last.begin() + static_cast<std::ptrdiff_t>(m.offset + len));
      set_u64(f, entry_at(0) + kLengthAt, len);
      set_u64(f, kFileBytesAt, f.size());
      reseal(f);
      tiny_corpus.check("manifest cut short, resealed", f, Expect::error);
    }
  }

  // Manifest fields set to extreme values, checksums made right so that the manifest decoder meets them. The
  // manifest is unaligned, so every byte position is tried as the start of a 4- and an 8-byte field.
  for (auto [file, corpus, values] :
       {std::tuple{&manifest_last, &tiny_corpus,
                   std::vector<uint64_t>(std::begin(kExtremes), std::end(kExtremes))},
        std::tuple{&big, &multi_corpus, std::vector<uint64_t>{0, 0xffffffff, ~0ull}}}) {
    SectionView m = sections_of(*file)[0];
    for (size_t p = 0; p < m.length; ++p) {
      for (uint64_t v : values) {
        if (p + 4 <= m.length && v <= 0xffffffff) {
          Bytes f = *file;
          set_u32(f, m.offset + p, static_cast<uint32_t>(v));
          reseal(f);
          corpus->check("manifest u32 = extreme, resealed", f, Expect::anything);
        }
        if (p + 8 <= m.length && v > 0x7fffffff) {
          Bytes f = *file;
          set_u64(f, m.offset + p, v);
          reseal(f);
          corpus->check("manifest u64 = extreme, resealed", f, Expect::anything);
        }
      }
    }
  }
  {
    SectionView m = sections_of(big)[0];
    for (int i = 0; i < 600; ++i) {
      Bytes f = big;
      size_t flips = 1 + rng.below(4);
      for (size_t k = 0; k < flips; ++k)
        f[m.offset + rng.below(m.length)] ^= static_cast<uint8_t>(1u << rng.below(8));
      reseal(f);
      multi_corpus.check("manifest bit flips, resealed", f, Expect::anything);
    }
  }

  // Sections in every physical order, table entries in every order: the same bundle.
  std::vector<size_t> order(sections_of(big).size());
  std::iota(order.begin(), order.end(), 0);
  do {
    multi_corpus.check("sections shuffled", relayout(big, order), Expect::original);
    multi_corpus.check("table entries shuffled", reorder_table(big, order), Expect::original);
  } while (std::next_permutation(order.begin(), order.end()));

  // Table entries swapped between payloads or copied over each other: always caught.
  const size_t n = order.size();
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      Bytes copied = big;
      std::copy(big.begin() + static_cast<std::ptrdiff_t>(entry_at(i)),
                big.begin() + static_cast<std::ptrdiff_t>(entry_at(i) + 32),
                copied.begin() + static_cast<std::ptrdiff_t>(entry_at(j)));
      multi_corpus.check("table entry copied over another", copied, Expect::error);
      if (i >= 1 && j > i) {
        Bytes swapped = big;
        uint32_t a = get_u32(big, entry_at(i) + kIdAt), b = get_u32(big, entry_at(j) + kIdAt);
        set_u32(swapped, entry_at(i) + kIdAt, b);
        set_u32(swapped, entry_at(j) + kIdAt, a);
        multi_corpus.check("payload ids swapped", swapped, Expect::error);
      }
    }
  }

  // Random bytes, some behind a valid magic and version, and splices of two bundles.
  for (int i = 0; i < 300; ++i) {
    Bytes f(rng.below(600));
    for (uint8_t& b : f) b = static_cast<uint8_t>(rng.next());
    if (i % 2 == 0 && f.size() >= 12) std::copy(small.begin(), small.begin() + 12, f.begin());
    if (i % 4 == 0 && f.size() >= 32) set_u64(f, kFileBytesAt, f.size());
    multi_corpus.check("random bytes", f, Expect::error);
  }
  for (int i = 0; i < 200; ++i) {
    size_t cut_a = rng.below(small.size()), cut_b = rng.below(big.size());
    Bytes f(small.begin(), small.begin() + static_cast<std::ptrdiff_t>(cut_a));
    f.insert(f.end(), big.begin() + static_cast<std::ptrdiff_t>(cut_b), big.end());
    multi_corpus.check("splice of two bundles", f, Expect::anything);
  }
  Bytes both = small;
  both.insert(both.end(), big.begin(), big.end());
  tiny_corpus.check("two bundles in one file", both, Expect::error);

  std::printf("small bundle (%zu bytes): ", small.size());
  tiny_corpus.summary();
  std::printf("large bundle (%zu bytes): ", big.size());
  multi_corpus.summary();
  size_t total = tiny_corpus.files() + multi_corpus.files();
  std::printf("corpus: %zu files\n", total);
  EXPECT_GE(total, 1000u);
}

}  // namespace
}  // namespace morgana::bundle
