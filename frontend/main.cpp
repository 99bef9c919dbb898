// The `morgana` command line. Each subcommand is one function; exit codes: 0 ok, 1 user error, 2 internal error.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "frontend/compile.h"
#include "frontend/files.h"
#include "frontend/memory_limits.h"
#include "frontend/measure.h"
#include "frontend/optimize.h"
#include "frontend/report.h"
#include "frontend/run.h"
#include "ir/diagnostic.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "morgana/runtime.h"
#include "runtime/bundle.h"
#include "search/cost_model.h"
#include "search/report.h"
#include "search/result_io.h"
#include "targets/cuda/nvrtc.h"
#include "targets/target.h"
#include "verify/equivalence.h"
#include "verify/float_check.h"

namespace po = boost::program_options;

namespace morgana::frontend {
namespace {

constexpr int kOk = 0, kUserError = 1, kInternalError = 2;

const char* const kUsage =
    "usage: morgana <command> [options]\n"
    "\n"
    "commands:\n"
    "  fmt FILE        print FILE in canonical form (--check: fail if it is not)\n"
    "  check FILE      parse and verify FILE, print every tensor's shape (--target T: and its estimated cost)\n"
    "  eval FILE       run FILE in the float reference on seeded random inputs, print output checksums\n"
    "  verify REF CAND prove CAND computes what REF does (finite-field random testing)\n"
    "  targets         list the hardware description files\n"
    "  optimize SPEC   search the fastest μGraph of SPEC for each target, write it for `compile` (cached)\n"
    "  merge SHARDS    merge the result files of `optimize --shard i/n` runs into the best μGraph(s)\n"
    "  compile FILE    lower, generate and compile FILE's programs for GPU targets into one bundle\n"
    "  inspect BUNDLE  print a bundle's programs, kernels, parameters and binary variants\n"
    "  run BUNDLE      run a bundle's program on this machine's GPU, check it against the CPU reference, time it\n"
    "  devices         list the GPUs of this machine\n"
    "\n"
    "`morgana <command> --help` describes a command's options.\n";

// The positional arguments of a command in order, each once, and whether the last one repeats (Boost reports an
// unbounded count as the largest unsigned).
struct Positionals {
  std::vector<std::string> names;
  bool repeated = false;
};
Positionals positionals_of(const po::positional_options_description& pos) {
  Positionals p;
  const unsigned n = pos.max_total_count();
  p.repeated = n == std::numeric_limits<unsigned>::max();
  const std::string last = n ? pos.name_for_position(n - 1) : std::string();
  for (unsigned i = 0; i < n; ++i) {
    const std::string& name = pos.name_for_position(i);
    if (p.names.empty() || p.names.back() != name) p.names.push_back(name);
    if (name == last) break;  // positions of one name are consecutive; the last name ends the list
  }
  return p;
}

// The name a positional option has in the usage lines: "file" is FILE, a repeated "files" FILES...
std::string argument_name(const Positionals& p, const std::string& option) {
  std::string upper;
  for (char c : option) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return p.repeated && option == p.names.back() ? upper + "..." : upper;
}

// What --help prints besides the options: the usage line(s) and at least one example command line, each runnable
// from the source root as written (tests/frontend/cli_test.cpp runs them in Cli.EveryHelpShowsAnExample).
struct CommandHelp {
  std::string usage;
  std::vector<std::string> examples;
};

// --help: the usage line, examples, the positional arguments by the names the usage gives them, then the options
// (Boost would list the positional ones as options: "--file arg").
void print_help(const CommandHelp& help, const po::options_description& opts,
                const po::positional_options_description& pos) {
  std::cout << help.usage << "\n\nexamples:\n";
  for (const std::string& e : help.examples) std::cout << "  " << e << "\n";
  std::cout << "\n";
  const Positionals p = positionals_of(pos);
  po::options_description named("options");
  for (const auto& o : opts.options())
    if (std::find(p.names.begin(), p.names.end(), o->long_name()) == p.names.end()) named.add(o);
  if (!p.names.empty()) {
    std::cout << "arguments:\n";
    for (const std::string& name : p.names) {
      const po::option_description* d = opts.find_nothrow(name, false);
      std::cout << "  " << std::left << std::setw(20) << argument_name(p, name) << "  " << (d ? d->description() : "")
                << "\n";
    }
  }
  std::cout << named;
}

// The likely typo's intended word among `candidates` (within one or two edits, nearest first), or "".
std::string likely_meant(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const std::string& c : candidates)
    if (likely_typo(word, c) && edit_distance(word, c) < best_d) best_d = edit_distance(word, c), best = c;
  return best;
}

// "unknown option '--tagret'" gains "; did you mean '--target'?" when one of the command's options is a likely typo
// of it (Boost already takes an unambiguous prefix such as --targ).
[[noreturn]] void unknown_option(const po::unknown_option& e, const po::options_description& opts,
                                 const std::string& command) {
  const std::string given = e.get_option_name();
  std::vector<std::string> names;
  for (const auto& o : opts.options()) names.push_back(o->canonical_display_name(po::command_line_style::allow_long));
  std::string msg = "unknown option '" + given + "' for `morgana " + command + "`";
  if (std::string hint = likely_meant(given, names); !hint.empty()) msg += "; did you mean '" + hint + "'?";
  throw UserError(msg + " (`morgana " + command + " --help` lists its options)");
}

// Parses a subcommand's arguments; returns false (after printing help) when --help was given. A missing positional
// argument is named as the usage line names it (FILE), not as the option Boost keeps it under (--file).
bool parse_args(const std::vector<std::string>& args, const CommandHelp& help, po::options_description& opts,
                const po::positional_options_description& pos, po::variables_map& vm) {
  opts.add_options()("help,h", "show this help");
  // "usage: morgana NAME ...": the command, for messages.
  constexpr std::string_view kPrefix = "usage: morgana ";
  const std::string command =
      help.usage.substr(kPrefix.size(), help.usage.find_first_of(" \n", kPrefix.size()) - kPrefix.size());
  try {
    po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
  } catch (const po::unknown_option& e) {
    unknown_option(e, opts, command);
  }
  if (vm.count("help")) {
    print_help(help, opts, pos);
    return false;
  }
  try {
    po::notify(vm);
  } catch (const po::required_option& e) {
    std::string name = e.get_option_name();
    if (name.rfind("--", 0) == 0) name = name.substr(2);
    const Positionals p = positionals_of(pos);
    const std::string usage_line = help.usage.substr(0, help.usage.find('\n'));
    if (std::find(p.names.begin(), p.names.end(), name) != p.names.end())
      throw UserError("missing " + argument_name(p, name) + " (" + usage_line + ")");
    throw;
  }
  return true;
}

// A seed or count that must not be negative: Boost reads "-1" into a uint64_t as 2^64 - 1.
struct Unsigned64 {
  uint64_t value = 0;
};
std::ostream& operator<<(std::ostream& o, const Unsigned64& u) { return o << u.value; }
void validate(boost::any& v, const std::vector<std::string>& values, Unsigned64*, int) {
  po::validators::check_first_occurrence(v);
  const std::string& s = po::validators::get_single_string(values);
  uint64_t x = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) throw po::invalid_option_value(s);
  v = Unsigned64{x};
}

int cmd_fmt(const std::vector<std::string>& args) {
  po::options_description opts("fmt options");
  opts.add_options()("file", po::value<std::string>()->required(), "spec or μGraph file")(
      "check", po::bool_switch(), "exit 1 if the file is not in canonical form")(
      "in-place,i", po::bool_switch(), "rewrite the file in canonical form");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse_args(args,
                  {"usage: morgana fmt FILE [--check | --in-place]",
                   {"morgana fmt examples/gqa_b1.mg", "morgana fmt --check examples/mugraphs/lora_concat.mg"}},
                  opts, pos, vm)) return kOk;
  std::string file = vm["file"].as<std::string>();
  const std::string source = read_text_file(file);
  std::string text = ir::print_with_comments(ir::parse_module(source, file), source);
  if (vm["check"].as<bool>()) {
    if (source != text) {
      std::cerr << file << ": not in canonical form (run `morgana fmt -i " << file << "`)\n";
      return kUserError;
    }
    return kOk;
  }
  if (vm["in-place"].as<bool>()) {
    write_file_atomically(file, text);
    return kOk;
  }
  std::cout << text;
  return kOk;
}

std::filesystem::path default_targets_dir() {
  if (const char* env = std::getenv("MORGANA_TARGETS_DIR")) return env;
  return MORGANA_SOURCE_TARGETS_DIR;
}

// The folder of target files: --targets-dir, else the default.
std::filesystem::path targets_dir(const po::variables_map& vm) {
  return vm.count("targets-dir") ? std::filesystem::path(vm["targets-dir"].as<std::string>()) : default_targets_dir();
}

// The targets --target names, in order; none when it is not given.
std::vector<targets::Target> named_targets(const po::variables_map& vm, const std::filesystem::path& dir) {
  std::vector<targets::Target> out;
  if (vm.count("target"))
    for (const std::string& name : vm["target"].as<std::vector<std::string>>())
      out.push_back(targets::find_target(name, dir));
  return out;
}

// The programs of `m` (read from `file`) that serve `target` (their `for` list names it, or they have none); an
// error naming the file and what its programs are for when none does.
std::vector<const ir::Graph*> programs_for(const ir::Module& m, const std::string& file, const std::string& target) {
  std::vector<const ir::Graph*> out;
  std::string held;
  for (const ir::Graph& g : m.programs) {
    if (ir::serves_target(g, target)) out.push_back(&g);
    held += (held.empty() ? "" : ", ") + program_label(g);
  }
  if (out.empty()) throw UserError(file + ": no program for target '" + target + "' (it holds " + held + ")");
  return out;
}

int cmd_check(const std::vector<std::string>& args) {
  po::options_description opts("check options");
  opts.add_options()("file", po::value<std::string>()->required(), "spec or μGraph file")(
      "target,t", po::value<std::vector<std::string>>(),
      "also print the cost model's estimate on this target of each program that is for it (repeatable; "
      "docs/cost-model.md)")(
      "targets-dir", po::value<std::string>(), "folder of target files (default: as `morgana targets`)");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse_args(args,
                  {"usage: morgana check FILE [--target NAME]...",
                   {"morgana check examples/attention_decode.mg",
                    "morgana check examples/mugraphs/attention_decode_split_kv.mg --target h100"}},
                  opts, pos, vm)) return kOk;
  const std::string file = vm["file"].as<std::string>();
  ir::Module m = ir::parse_file(file);
  // Found before anything is printed, so a bad name is the only output.
  std::vector<targets::Target> costed = named_targets(vm, targets_dir(vm));
  std::vector<std::vector<const ir::Graph*>> costed_programs;
  for (const targets::Target& t : costed) costed_programs.push_back(programs_for(m, file, t.identity.name));
  std::cout << check_report(m);
  for (size_t i = 0; i < costed.size(); ++i)
    for (const ir::Graph* g : costed_programs[i])
      std::cout << program_label(*g) << ": " << search::estimate(*g, costed[i]).str() << "\n";
  std::cout << "ok\n";
  return kOk;
}

int cmd_eval(const std::vector<std::string>& args) {
  po::options_description opts("eval options");
  opts.add_options()("file", po::value<std::string>()->required(), "spec or μGraph file")(
      "seed", po::value<Unsigned64>()->default_value(Unsigned64{1}), "seed of the random inputs (uniform in [-1, 1])")(
      "precision", po::value<std::string>()->default_value("f64"), "accumulate in f64 or f32")(
      "target", po::value<std::string>(), "of a file of several programs, evaluate the one for this target");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse_args(args,
                  {"usage: morgana eval FILE [--seed N] [--precision f64|f32] [--target NAME]",
                   {"morgana eval examples/mugraphs/matmul_split_k.mg", "morgana eval examples/lora.mg --seed 7"}},
                  opts, pos, vm))
    return kOk;
  EvalOptions eo;
  eo.seed = vm["seed"].as<Unsigned64>().value;
  std::string prec = vm["precision"].as<std::string>();
  if (prec != "f64" && prec != "f32") throw UserError("--precision must be f64 or f32, got '" + prec + "'");
  eo.precision = prec == "f32" ? verify::Precision::f32 : verify::Precision::f64;
  const std::string file = vm["file"].as<std::string>();
  ir::Module m = ir::parse_file(file);
  if (vm.count("target")) {
    ir::Module picked;
    for (const ir::Graph* g : programs_for(m, file, vm["target"].as<std::string>())) picked.programs.push_back(*g);
    m = std::move(picked);
  }
  for (const ir::Graph& g : m.programs) check_fits_host(g, sizeof(double), 1, "evaluating '" + g.name() + "'");
  auto start = std::chrono::steady_clock::now();
  std::cout << eval_report(m, eo) << std::flush;
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "evaluated in %.2f s\n", s);
  return kOk;
}

int cmd_verify(const std::vector<std::string>& args) {
  po::options_description opts("verify options");
  opts.add_options()("ref", po::value<std::string>()->required(), "reference program (the spec)")(
      "cand", po::value<std::string>()->required(), "candidate program (e.g. a μGraph)")(
      "trials", po::value<int>()->default_value(3), "independent random trials")(
      "seed", po::value<Unsigned64>()->default_value(Unsigned64{1}), "seed of all randomness")(
      "full", po::bool_switch(), "compare every output element (the default)")(
      "sampled", po::bool_switch(),
      "compare a structured sample of output elements only, computed on demand, every block of CAND reached (the "
      "search's filter: fast, but a candidate wrong only outside the sample passes; the verdict says so)")(
      "float", po::bool_switch(),
      "then run the float check: CAND in device precision against REF in f64 on random and large-magnitude "
      "inputs, with a dtype tolerance (verify/float_check.h); with --sampled, at the sampled elements")(
      "target", po::value<std::string>(),
      "of a CAND of several programs (optimize's result for several targets), check the one for this target; "
      "without it every program is checked");
  po::positional_options_description pos;
  pos.add("ref", 1).add("cand", 1);
  po::variables_map vm;
  if (!parse_args(args,
                  {"usage: morgana verify REF.mg CAND.mg [--trials N] [--seed S] [--sampled] [--float] [--target NAME]",
                   {"morgana verify examples/lora.mg examples/mugraphs/lora_concat.mg --float",
                    "morgana verify examples/gqa_b1.mg gqa_best.mg --target h100   # gqa_best.mg: optimize's result"}},
                  opts, pos, vm))
    return kOk;
  verify::EquivalenceOptions eo;
  eo.trials = vm["trials"].as<int>();
  eo.seed = vm["seed"].as<Unsigned64>().value;
  // Sound by default: every output element. The sampled mode is asked for by name.
  if (vm["full"].as<bool>() && vm["sampled"].as<bool>()) throw UserError("--full and --sampled exclude each other");
  eo.full = !vm["sampled"].as<bool>();
  if (eo.trials < 1) throw UserError("--trials must be >= 1");
  const std::string ref_file = vm["ref"].as<std::string>(), cand_file = vm["cand"].as<std::string>();
  ir::Module ref = ir::parse_file(ref_file);
  ir::Module cand = ir::parse_file(cand_file);
  if (ref.programs.size() != 1)
    throw UserError(ref_file + ": holds " + std::to_string(ref.programs.size()) +
                    " programs; verify's REF is one spec");
  std::vector<const ir::Graph*> checked;
  if (vm.count("target"))
    checked = programs_for(cand, cand_file, vm["target"].as<std::string>());
  else
    for (const ir::Graph& g : cand.programs) checked.push_back(&g);
  // Both programs at once, in field pairs of two 64-bit words (the float check's f64 values take less).
  check_fits_host(ref.programs[0], 16, 2, "checking '" + ref.programs[0].name() + "'");
  for (const ir::Graph* g : checked) check_fits_host(*g, 16, 2, "checking '" + g->name() + "'");
  // Several programs (one per target, as optimize writes them): each is checked and its verdicts say which.
  bool ok = true;
  for (const ir::Graph* g : checked) {
    if (checked.size() > 1) std::printf("%s:\n", program_label(*g).c_str());
    verify::Verdict v = verify::equivalent(ref.programs[0], *g, eo);
    std::printf("%s\n(%.2f s, seed %llu)\n", v.str().c_str(), v.seconds, static_cast<unsigned long long>(eo.seed));
    ok = ok && v.equivalent();
    if (vm["float"].as<bool>() && v.kind != verify::Verdict::InterfaceMismatch) {
      verify::FloatCheckOptions fo;
      fo.seed = eo.seed;
      fo.sampled = vm["sampled"].as<bool>();
      verify::FloatCheck fc = verify::float_check(ref.programs[0], *g, fo);
      std::printf("%s\n", fc.str().c_str());
      ok = ok && fc.pass;
    }
  }
  return ok ? kOk : kUserError;
}

int cmd_targets(const std::vector<std::string>& args) {
  po::options_description opts("targets options");
  opts.add_options()("targets-dir", po::value<std::string>(),
                     "folder of target files (default: $MORGANA_TARGETS_DIR, else the source tree's targets/)")(
      "dir", po::value<std::string>(), "the same (the older spelling)");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse_args(args, {"usage: morgana targets [--targets-dir DIR]", {"morgana targets", "morgana targets --targets-dir targets"}},
                  opts, pos, vm)) return kOk;
  if (vm.count("dir") && vm.count("targets-dir")) throw UserError("--dir and --targets-dir name the same folder; give one");
  std::filesystem::path dir = vm.count("dir") ? std::filesystem::path(vm["dir"].as<std::string>()) : targets_dir(vm);
  std::cout << targets::render_targets_table(targets::load_all_targets(dir));
  return kOk;
}

int cmd_inspect(const std::vector<std::string>& args) {
  po::options_description opts("inspect options");
  opts.add_options()("file", po::value<std::string>()->required(), "bundle file (.mgb)")(
      "mugraph", po::bool_switch(), "also print each program's μGraph text");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse_args(args,
                  {"usage: morgana inspect BUNDLE [--mugraph]",
                   {"morgana inspect gqa.mgb --mugraph   # gqa.mgb: written by `morgana compile examples/gqa_b1.mg -o "
                    "gqa.mgb`"}},
                  opts, pos, vm)) return kOk;
  bundle::Result r = bundle::read_bundle_file(vm["file"].as<std::string>());
  if (!r.ok()) {
    std::cerr << "error: " << r.error << "\n";
    return kUserError;
  }
  const bundle::Bundle& b = *r.bundle;
  auto dims = [](const std::vector<int64_t>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s;
  };
  std::printf("bundle format version %u: %zu program(s), %zu variant(s)\n", b.format_version,
              b.programs.size(), b.variants.size());
  for (size_t p = 0; p < b.programs.size(); ++p) {
    const bundle::Program& prog = b.programs[p];
    std::string refs;
    for (uint32_t v : prog.variants) refs += (refs.empty() ? "" : ", ") + std::to_string(v);
    std::printf("program %zu: %s  workspace %llu bytes  variants %s\n", p, prog.name.c_str(),
                static_cast<unsigned long long>(prog.workspace_bytes), refs.c_str());
    for (size_t k = 0; k < prog.kernels.size(); ++k) {
      const bundle::Kernel& ker = prog.kernels[k];
      std::printf("  kernel %zu: %s  grid %ux%ux%u  block %ux%ux%u  dynamic smem %u bytes\n", k,
                  ker.name.c_str(), ker.grid.x, ker.grid.y, ker.grid.z, ker.block.x, ker.block.y, ker.block.z,
                  ker.dynamic_smem_bytes);
      for (const bundle::Parameter& par : ker.params)
        std::printf("    %-9s %s %s[%s] strides [%s]\n", std::string(bundle::name(par.role)).c_str(),
                    par.name.c_str(), std::string(bundle::name(par.dtype)).c_str(), dims(par.shape).c_str(),
                    dims(par.strides).c_str());
      for (size_t m = 0; m < ker.tensor_maps.size(); ++m) {
        const bundle::TensorMap& tm = ker.tensor_maps[m];
        std::vector<int64_t> box(tm.box.begin(), tm.box.end());
        // read_bundle checked that the map's parameter exists.
        std::printf("    tensor map %zu of %s  box [%s]  swizzle %u\n", m, ker.params[tm.param].name.c_str(),
                    dims(box).c_str(), tm.swizzle_bytes);
      }
    }
    if (vm["mugraph"].as<bool>()) {
      std::printf("  μGraph:\n");
      size_t start = 0;
      while (start < prog.mugraph.size()) {
        size_t end = prog.mugraph.find('\n', start);
        if (end == std::string::npos) end = prog.mugraph.size();
        std::printf("    %s\n", prog.mugraph.substr(start, end - start).c_str());
        start = end + 1;
      }
    } else {
      std::printf("  μGraph: %zu bytes (--mugraph prints it)\n", prog.mugraph.size());
    }
  }
  for (size_t i = 0; i < b.variants.size(); ++i) {
    const bundle::Variant& v = b.variants[i];
    std::printf("variant %zu: %s %s %s  %zu bytes  crc64 0x%016llx ok\n", i, v.target.c_str(),
                std::string(bundle::name(v.kind)).c_str(), v.arch.c_str(), v.payload.size(),
                static_cast<unsigned long long>(v.checksum));
  }
  return kOk;
}

int cmd_compile(const std::vector<std::string>& args) {
  po::options_description opts("compile options");
  opts.add_options()("file", po::value<std::string>()->required(), "spec or μGraph file (.mg)")(
      "target,t", po::value<std::vector<std::string>>(),
      "target file name (repeatable; default: every NVIDIA target of `morgana targets`, and every target a "
      "program's `for [...]` list names; a program with such a list is built only for the targets it names)")(
      "output,o", po::value<std::string>(), "bundle to write (default: FILE with extension .mgb)")(
      "emit", po::value<std::string>(),
      "print one stage instead of writing a bundle: cuda (generated source), kernel-ir, mugraph (after tiling)")(
      "no-ptx", po::bool_switch(), "leave out the PTX fallback for GPUs no target names")(
      "spill-to-global", po::bool_switch(),
      "let a block op whose tiles exceed a target's shared memory keep its largest tiles in global memory (slow; "
      "for trying a hand-written μGraph)")(
      "jobs,j", po::value<unsigned>()->default_value(0), "parallel compiler runs (0: one per core)")(
      "targets-dir", po::value<std::string>(), "folder of target files (default: as `morgana targets`)")(
      "quiet,q", po::bool_switch(), "no progress lines");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse_args(args,
                  {"usage: morgana compile FILE [--target NAME]... [-o OUT.mgb] [--emit cuda|kernel-ir|mugraph]",
                   {"morgana compile examples/gqa_b1.mg --target h200 --target a100 -o gqa.mgb",
                    "morgana compile examples/lora.mg --target h100 --emit cuda"}},
                  opts, pos, vm))
    return kOk;
  std::string file = vm["file"].as<std::string>();
  std::filesystem::path dir = targets_dir(vm);
  ir::Module m = ir::parse_file(file);
  const std::string out = vm.count("output") ? vm["output"].as<std::string>()
                                             : std::filesystem::path(file).replace_extension(".mgb").string();
  if (!vm.count("emit")) check_writable(out);
  CompileOptions co;
  co.targets = vm.count("target") ? named_targets(vm, dir) : default_targets(m.programs, dir);
  if (vm.count("emit")) {
    check_targets_served(m.programs, co.targets);
    for (const ir::Graph& g : m.programs)
      for (const targets::Target& t : co.targets)
        if (ir::serves_target(g, t.identity.name)) std::cout << emit_stage(g, t, vm["emit"].as<std::string>());
    return kOk;
  }
  co.ptx_fallback = !vm["no-ptx"].as<bool>();
  co.spill_to_global = vm["spill-to-global"].as<bool>();
  co.jobs = vm["jobs"].as<unsigned>();
  if (!vm["quiet"].as<bool>()) co.progress = [](const std::string& l) { std::cerr << l << "\n"; };
  auto start = std::chrono::steady_clock::now();
  bundle::Bundle b = compile_programs(m.programs, co);
  if (bundle::Status st = bundle::write_bundle_file(out, b); !st.ok()) throw UserError(st.error);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "wrote " << out << ": " << b.programs.size() << " program(s), " << b.variants.size()
            << " variant(s) in " << std::fixed << std::setprecision(2) << secs << " s\n";
  return kOk;
}

// Writes the best μGraph(s) of `results` to `out`, as `optimize` and `merge` do; throws when a target has none.
void write_best(const std::vector<search::SearchResult>& results, const std::string& out) {
  if (std::string missing = frontend::targets_without_result(results); !missing.empty())
    throw UserError("no verified μGraph found for " + missing + "; " + out +
                    " not written (a longer --time-limit or a larger --max-kernel-ops or --max-block-ops may find "
                    "one)");
  write_file_atomically(out, best_mugraphs(results));
  std::string targets;
  for (const search::SearchResult& r : results) targets += (targets.empty() ? "" : ", ") + r.target;
  std::cerr << "wrote " << out << ": the best μGraph for " << targets << "\n";
}

int cmd_optimize(const std::vector<std::string>& args) {
  const search::SearchOptions d;
  po::options_description opts("optimize options");
  opts.add_options()("file", po::value<std::string>()->required(), "spec file (.mg) holding one program")(
      "target,t", po::value<std::vector<std::string>>(),
      "target file name (repeatable; default: the spec's `for [...]` list, else every NVIDIA target of `morgana "
      "targets`)")(
      "output,o", po::value<std::string>()->required(),
      "file to write: the best μGraph per target, marked `for [targets]` (what `compile` builds for); with "
      "--shard, this shard's result file for `morgana merge`")(
      "time-limit", po::value<double>()->default_value(d.time_limit_s),
      ("seconds per target: the enumeration stops at " +
       std::to_string(static_cast<int>(search::kEnumerationShare * 100)) +
       "% of it, verifying the best candidates takes the rest (checks stop before one would end past it, once "
       "the best has passed them all); a search cut short says so and is not cached")
          .c_str())(
      "threads", po::value<int>()->default_value(d.threads), "search threads (0: one per core); the answer does "
                                                             "not depend on it")(
      "max-kernel-ops", po::value<int>()->default_value(d.max_kernel_ops), "kernel-level ops of a candidate")(
      "max-block-ops", po::value<int>()->default_value(d.max_block_ops), "ops of one block graph")(
      "top", po::value<int>()->default_value(d.top), "verified candidates to keep and report")(
      "trials", po::value<int>()->default_value(d.trials), "finite-field trials per equivalence check")(
      "seed", po::value<Unsigned64>()->default_value(Unsigned64{d.seed}), "seed of the verification")(
      "shard", po::value<std::string>(),
      "search only shard i of n (e.g. 0/4) for one --target, and write its result file to -o; `morgana merge` "
      "combines the n files")(
      "no-cache", po::bool_switch(), "neither read nor write the result cache ($XDG_CACHE_HOME/morgana)")(
      "measure", po::bool_switch(),
      "on a machine with the target's GPU: compile, check and time the best candidate of each form, then the next "
      "best, there and choose the fastest (elsewhere the cost model decides, and the report says why); the search "
      "keeps 4x --measure-top candidates unless --top is given")(
      "measure-top", po::value<int>()->default_value(MeasureOptions{}.top), "candidates --measure times")(
      "device", po::value<int>()->default_value(0), "CUDA device --measure runs on")(
      "no-abstract-pruning", po::bool_switch(), "keep prefixes the abstract expressions would prune (slow; to "
                                                "measure what the pruning saves)")(
      "quiet,q", po::bool_switch(), "no progress line")(
      "targets-dir", po::value<std::string>(), "folder of target files (default: as `morgana targets`)");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse_args(args,
                  {"usage: morgana optimize SPEC.mg [--target NAME]... -o BEST.mg [--time-limit S] [--threads N]\n"
                  "         [--max-kernel-ops K] [--max-block-ops B] [--top N] [--shard i/n] [--no-cache] [--quiet]\n"
                  "         [--measure [--measure-top N] [--device D]]",
                   {"morgana optimize examples/gqa_b1.mg --target h200 -o gqa_best.mg",
                    "morgana optimize examples/lora.mg --target h100 --shard 0/2 -o lora.0.result"}},
                  opts, pos, vm))
    return kOk;
  OptimizeOptions oo;
  search::SearchOptions& so = oo.search;
  auto at_least = [&](const char* option, int min) {
    int v = vm[option].as<int>();
    if (v < min) throw UserError("--" + std::string(option) + " must be >= " + std::to_string(min));
    return v;
  };
  so.time_limit_s = vm["time-limit"].as<double>();
  if (!(so.time_limit_s > 0)) throw UserError("--time-limit must be a positive number of seconds");
  so.threads = at_least("threads", 0);
  so.max_kernel_ops = at_least("max-kernel-ops", 1);
  so.max_block_ops = at_least("max-block-ops", 1);
  so.top = at_least("top", 1);
  so.trials = at_least("trials", 1);
  so.seed = vm["seed"].as<Unsigned64>().value;
  so.abstract_pruning = !vm["no-abstract-pruning"].as<bool>();
  if (vm.count("shard")) so.shard = parse_shard(vm["shard"].as<std::string>());
  oo.use_cache = !vm["no-cache"].as<bool>();
  // The line is redrawn in place, so only on a terminal; "\x1b[K" clears what a longer line left behind.
  if (!vm["quiet"].as<bool>() && isatty(STDERR_FILENO))
    oo.progress = [](const std::string& line) { std::cerr << "\r" << line << "\x1b[K" << std::flush; };

  std::string file = vm["file"].as<std::string>();
  ir::Module m = ir::parse_file(file);
  if (m.programs.size() != 1)
    throw UserError("optimize searches one program, and this file holds " + std::to_string(m.programs.size()),
                    {file, 0, 0});
  std::filesystem::path dir = targets_dir(vm);
  std::vector<targets::Target> targets =
      vm.count("target") ? named_targets(vm, dir) : default_targets(m.programs, dir);
  const bool measure = vm["measure"].as<bool>();
  MeasureOptions mo;
  mo.top = at_least("measure-top", 1);
  // --measure times the best candidate of each form first (choose_finalists): the search keeps four times as many
  // to find them among, unless --top says how many.
  if (measure && vm["top"].defaulted()) so.top = std::max(so.top, 4 * mo.top);
  oo.keep_cached_candidates = measure;
  mo.device = at_least("device", 0);
  mo.seed = so.seed;
  if (!vm["quiet"].as<bool>()) mo.progress = [](const std::string& line) { std::cerr << line << "\n"; };
  if (measure && so.shard.count > 1)
    throw UserError("--measure chooses among a whole search's candidates: run it on `morgana merge`'s answer, not "
                    "with --shard");
  if (so.shard.count > 1 && targets.size() != 1) {
    const std::string given = vm.count("target") ? std::to_string(targets.size()) + " --target options"
                                                 : "none (without it the search would cover " +
                                                       std::to_string(targets.size()) + " targets)";
    throw UserError("--shard searches a part of one target's search: give exactly one --target (one job array per "
                    "target); given: " + given);
  }

  check_writable(vm["output"].as<std::string>());
  // The search's full check of its answer holds the spec and the answer in field pairs; each target must hold them.
  check_fits_host(m.programs[0], 16, 2, "searching '" + m.programs[0].name() + "'");
  for (const targets::Target& t : targets) check_fits_device(m.programs[0], t);
  std::vector<search::SearchResult> results;
  for (const targets::Target& t : targets) {
    Optimized o = optimize_for(m.programs[0], t, oo);
    if (!results.empty()) std::cout << "\n";
    if (o.cached)
      std::cout << "(from the cache: this search ran before, and what it found was checked again"
                << (oo.keep_cached_candidates ? "" : "; only the best is shown") << "; --no-cache searches again)\n";
    std::cout << search::render_report(o.result, true) << std::flush;
    if (measure && o.result.found()) {
      Measurement mm = measure_candidates(o.result, t, mo);
      std::cout << render_measurement(mm) << std::flush;
      apply_measurement(mm, o.result);
    }
    results.push_back(std::move(o.result));
  }
  std::string out = vm["output"].as<std::string>();
  if (so.shard.count > 1) {
    write_file_atomically(out, search::write_result(results[0]));
    std::cerr << "wrote " << out << ": shard " << so.shard.index << "/" << so.shard.count << " of the search for "
              << results[0].target << " (`morgana merge` combines the " << so.shard.count << " shard files)\n";
    return kOk;
  }
  write_best(results, out);
  return kOk;
}

int cmd_merge(const std::vector<std::string>& args) {
  po::options_description opts("merge options");
  opts.add_options()("files", po::value<std::vector<std::string>>()->required(),
                     "result files of `morgana optimize --shard i/n` (every shard of each target, any order)")(
      "output,o", po::value<std::string>()->required(), "file to write the best μGraph(s) to, as `optimize` does")(
      "report", po::bool_switch(), "print each target's full report (default: one line per target)")(
      "spec", po::value<std::string>(),
      "the spec file the shards searched (one program): every result file must hold it (without it, the spec the "
      "files hold is taken, and the candidates are checked against that)")(
      "targets-dir", po::value<std::string>(), "folder of target files (default: as `morgana targets`)");
  po::positional_options_description pos;
  pos.add("files", -1);
  po::variables_map vm;
  if (!parse_args(args,
                  {"usage: morgana merge SHARD_FILES... -o BEST.mg [--spec SPEC.mg] [--report]\n"
                   "   (every candidate in the files is checked again against the spec before it is believed)",
                   {"morgana merge lora.0.result lora.1.result -o lora_best.mg --report   # the shards of `morgana "
                    "optimize --shard i/2`"}},
                  opts, pos, vm))
    return kOk;
  check_writable(vm["output"].as<std::string>());
  std::optional<ir::Graph> spec;
  if (vm.count("spec")) {
    const std::string file = vm["spec"].as<std::string>();
    ir::Module m = ir::parse_file(file);
    if (m.programs.size() != 1)
      throw UserError("--spec names a file of one program, and this one holds " + std::to_string(m.programs.size()),
                      {file, 0, 0});
    spec = std::move(m.programs[0]);
    spec->set_for_targets({});  // as optimize keys and records it
  }
  std::vector<search::SearchResult> results =
      merge_shard_files(vm["files"].as<std::vector<std::string>>(), targets_dir(vm), spec ? &*spec : nullptr);
  for (size_t i = 0; i < results.size(); ++i) {
    const search::SearchResult& r = results[i];
    if (vm["report"].as<bool>()) {
      std::cout << (i ? "\n" : "") << search::render_report(r, true);
      continue;
    }
    std::cout << search::render_summary(r) << "\n";
  }
  write_best(results, vm["output"].as<std::string>());
  return kOk;
}

int cmd_devices(const std::vector<std::string>& args) {
  po::options_description opts("devices options");
  opts.add_options()("targets-dir", po::value<std::string>(), "folder of target files (default: as `morgana targets`)");
  po::positional_options_description pos;
  po::variables_map vm;
  if (!parse_args(args,
                  {"usage: morgana devices   (the GPUs the runtime sees and the target files that describe them; exit "
                   "1 when there is none)",
                   {"morgana devices"}},
                  opts, pos, vm))
    return kOk;
  int n = 0;
  if (mg_status s = mg_device_count(&n); s != MG_OK) throw UserError(mg_last_error());
  if (n == 0) throw UserError("the NVIDIA driver sees no GPU");
  std::vector<targets::Target> all = targets::load_all_targets(targets_dir(vm));
  for (int i = 0; i < n; ++i) {
    mg_device_info d{};
    if (mg_status s = mg_device_describe(i, &d); s != MG_OK) throw UserError(mg_last_error());
    // Target files for this GPU: the same compute capability (sm_90 and sm_90a both describe a 9.0 device).
    std::string matching;
    for (const targets::Target& t : all)
      if (t.identity.vendor == "nvidia" && cuda::cuda_arch_number(t.identity.arch) == d.cc_major * 10 + d.cc_minor)
        matching += (matching.empty() ? "" : ",") + t.identity.name;
    std::printf("device %d: %s, %s (compute capability %d.%d), %d SMs, %d KiB shared memory per block (opt-in); "
                "targets: %s\n",
                i, d.name, d.arch, d.cc_major, d.cc_minor, d.sm_count, d.smem_per_block_optin / 1024,
                matching.empty() ? "(none: compile with PTX)" : matching.c_str());
  }
  return kOk;
}

int cmd_run(const std::vector<std::string>& args) {
  po::options_description opts("run options");
  opts.add_options()("file", po::value<std::string>()->required(), "bundle file (.mgb)")(
      "program", po::value<std::string>(), "program name (default: the bundle's only one)")(
      "device", po::value<int>()->default_value(0), "CUDA device ordinal")(
      "random-inputs", po::bool_switch(), "seeded random inputs in [-1, 1] (the default, and for now the only source)")(
      "seed", po::value<Unsigned64>()->default_value(Unsigned64{1}), "input seed")(
      "check", po::bool_switch(), "compare every output with the CPU reference (exit 1 on a mismatch)")(
      "iterations", po::value<int>()->default_value(50), "timed launches, median reported (0: no timing)");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse_args(args,
                  {"usage: morgana run BUNDLE [--program NAME] --random-inputs --check [--iterations N]",
                   {"morgana run gqa.mgb --random-inputs --check   # gqa.mgb: written by `morgana compile "
                    "examples/gqa_b1.mg -o gqa.mgb`"}},
                  opts, pos, vm))
    return kOk;
  RunOptions ro;
  ro.bundle_path = vm["file"].as<std::string>();
  if (vm.count("program")) ro.program = vm["program"].as<std::string>();
  ro.device = vm["device"].as<int>();
  ro.seed = vm["seed"].as<Unsigned64>().value;
  ro.check = vm["check"].as<bool>();
  ro.iterations = vm["iterations"].as<int>();
  RunResult r = run_bundle(ro);
  std::cout << r.report;
  return r.pass ? kOk : kUserError;
}

int dispatch(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return kUserError;
  }
  std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::cout << kUsage;
    return kOk;
  }
  if (cmd == "--version") {
    std::cout << "morgana " << MORGANA_VERSION << "\n";
    return kOk;
  }
  // The subcommands by name: dispatch and the "did you mean" of a mistyped one read the same table.
  using Command = int (*)(const std::vector<std::string>&);
  static const std::vector<std::pair<std::string, Command>> kCommands = {
      {"fmt", cmd_fmt},         {"check", cmd_check},       {"eval", cmd_eval},   {"verify", cmd_verify},
      {"targets", cmd_targets}, {"inspect", cmd_inspect},   {"optimize", cmd_optimize}, {"merge", cmd_merge},
      {"compile", cmd_compile}, {"run", cmd_run},           {"devices", cmd_devices}};
  std::vector<std::string> commands;
  for (const auto& [name, fn] : kCommands) {
    if (cmd == name) return fn(args);
    commands.push_back(name);
  }
  std::cerr << "morgana: unknown command '" << cmd << "'";
  if (std::string hint = likely_meant(cmd, commands); !hint.empty()) std::cerr << "; did you mean '" << hint << "'?";
  std::cerr << "\n\n" << kUsage;
  return kUserError;
}

}  // namespace
}  // namespace morgana::frontend

int main(int argc, char** argv) {
  using namespace morgana;
  try {
    return frontend::dispatch(argc, argv);
  } catch (const UserError& e) {
    std::cerr << e.render() << "\n";
    return frontend::kUserError;
  } catch (const po::error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return frontend::kUserError;
  } catch (const std::filesystem::filesystem_error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return frontend::kUserError;
  } catch (const InternalError& e) {
    std::cerr << e.what() << "\n(this is a bug in morgana; please report it with the input that caused it)\n";
    return frontend::kInternalError;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return frontend::kInternalError;
  }
}
