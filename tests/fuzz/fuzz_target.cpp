// Fuzz target: a target file (docs/targets.md), through the loader and then through everything that computes with
// its numbers. A refusal must be a UserError with a location; a target that loads must then render in `morgana
// targets`' table, price small programs in the cost model and lower them to CUDA without a fault (a zero or a
// huge value that passed validation would divide by zero or overflow there: issue 17's reproducer 3).
//
// The file is written into a copy of the source tree's targets folder, beside the real files, so that `base` can
// name them; it is called after the `name` it states (the loader requires the stem to be the name), and a real file
// it replaces is restored afterwards.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>

#include "ir/diagnostic.h"
#include "ir/parser.h"
#include "search/cost_model.h"
#include "targets/cuda/codegen.h"
#include "targets/target.h"
#include "tests/fuzz/fuzz_support.h"

namespace fs = std::filesystem;
using namespace morgana;

namespace {

// Small programs of the kinds the cost model and the lowering treat differently, from the spec fuzzer's seeds: kernel
// ops only (matmuls, norms, softmax), a tiled matmul with a split reduction, and a flash-decoding block op with
// online-softmax accumulators.
constexpr const char* kPrograms[] = {"small_attention.mg", "small_split_k.mg", "small_split_kv.mg"};

struct Workspace {
  fs::path root;                             // the copy of targets/
  std::map<fs::path, std::string> original;  // every file of the copy, to restore one a fuzzed file replaced
  ir::Module programs;

  Workspace() {
    char tmpl[] = "/tmp/morgana-fuzz-target-XXXXXX";
    if (!mkdtemp(tmpl)) fuzz::finding("cannot make a temporary folder");
    root = fs::path(tmpl) / "targets";
    fs::copy(fuzz::source_targets_dir(), root, fs::copy_options::recursive);
    for (const fs::path& f : targets::list_target_files(root)) original[f] = read(f);
    for (const char* name : kPrograms)
      for (ir::Graph& g : ir::parse_file(fs::path(MORGANA_SOURCE_ROOT) / "tests/fuzz/corpus/spec" / name).programs)
        programs.programs.push_back(std::move(g));
  }
  ~Workspace() {
    std::error_code ec;
    fs::remove_all(root.parent_path(), ec);
  }
  static std::string read(const fs::path& f) {
    std::ifstream in(f, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  static void write(const fs::path& f, std::string_view bytes) {
    std::ofstream out(f, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
};

Workspace& workspace() {
  static Workspace w;
  return w;
}

// The stem the loader will accept: the value of the first line `name = "..."` when it is a plain file name, else
// "fuzzed". (A scan, not std::regex: libstdc++'s regex recurses per character and overflows the stack on long runs.)
std::string stem_for(std::string_view text) {
  auto plain = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; };
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    std::string_view line = text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    at = end == std::string_view::npos ? text.size() : end + 1;
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string_view::npos || line.substr(i, 4) != "name") continue;
    i = line.find_first_not_of(" \t", i + 4);
    if (i == std::string_view::npos || line[i] != '=') continue;
    i = line.find_first_not_of(" \t", i + 1);
    if (i == std::string_view::npos || line[i] != '"') continue;
    size_t close = line.find('"', i + 1);
    std::string_view name = line.substr(i + 1, close == std::string_view::npos ? 0 : close - i - 1);
    if (!name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), plain)) return std::string(name);
    return "fuzzed";
  }
  return "fuzzed";
}

void use(const targets::Target& t, const ir::Module& programs) {
  (void)targets::render_targets_table({t});
  for (const ir::Graph& g : programs.programs) {
    try {
      (void)search::estimate(g, t);
      if (t.identity.vendor == "nvidia") (void)cuda::emit_cuda(cuda::lower(g, t), t);
    } catch (const UserError&) {
      // A program that does not fit this target is refused by name: an answer.
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Workspace& w = workspace();
  const std::string text(fuzz::as_text(data, size));
  const fs::path file = w.root / "cuda" / (stem_for(text) + ".toml");
  Workspace::write(file, text);
  std::optional<targets::Target> t;
  try {
    t = targets::load_target(file, w.root);
  } catch (const UserError&) {
  }
  if (t) use(*t, w.programs);
  auto real = w.original.find(file);
  if (real != w.original.end())
    Workspace::write(file, real->second);
  else
    fs::remove(file);
  return 0;
}
