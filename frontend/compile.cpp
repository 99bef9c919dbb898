#include "frontend/compile.h"
#include "frontend/memory_limits.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "ir/diagnostic.h"
#include "ir/printer.h"
#include "targets/cuda/codegen.h"
#include "targets/cuda/nvrtc.h"
#include "targets/lower/lower.h"

namespace morgana::frontend {

namespace {

bundle::DType bundle_dtype(ir::DType t) {
  switch (t) {
    case ir::DType::f16: return bundle::DType::f16;
    case ir::DType::bf16: return bundle::DType::bf16;
    case ir::DType::f32: return bundle::DType::f32;
  }
  MG_CHECK(false, "unknown dtype");
  return bundle::DType::f32;
}

bundle::Role bundle_role(lower::Role r) {
  switch (r) {
    case lower::Role::input: return bundle::Role::input;
    case lower::Role::output: return bundle::Role::output;
    case lower::Role::workspace: return bundle::Role::workspace;
  }
  MG_CHECK(false, "unknown role");
  return bundle::Role::input;
}

uint32_t launch_dim(int64_t v, const char* what) {
  MG_CHECK(v >= 1, std::string("lowering produced an empty ") + what);
  // Tensors within ir::kMaxElements can still need more blocks along one grid dimension than a launch takes: the
  // user's shapes, not a bug.
  if (v > bundle::kMaxLaunchDim)
    throw UserError(std::string("a kernel needs a ") + what + " of " + std::to_string(v) +
                    " along one dimension, more than a launch allows (" + std::to_string(bundle::kMaxLaunchDim) +
                    "): the tensors are too large to compile");
  return static_cast<uint32_t>(v);
}

// The bundle's view of a lowered program: launch geometry and parameters, no code.
bundle::Program manifest(const lower::LoweredProgram& lp, const std::string& mugraph) {
  bundle::Program p;
  p.name = lp.name;
  p.mugraph = mugraph;
  p.workspace_bytes = static_cast<uint64_t>(lp.workspace_bytes);
  std::vector<bundle::Parameter> params;
  for (const lower::Param& q : lp.params)
    params.push_back({q.name, bundle_role(q.role), bundle_dtype(q.dtype), q.shape, q.strides});
  for (const lower::Kernel& k : lp.kernels) {
    bundle::Kernel bk;
    bk.name = k.entry;
    bk.grid = {launch_dim(k.grid[0], "grid"), launch_dim(k.grid[1], "grid"), launch_dim(k.grid[2], "grid")};
    bk.block = {launch_dim(k.block[0], "block"), launch_dim(k.block[1], "block"), launch_dim(k.block[2], "block")};
    MG_CHECK(k.smem_bytes >= 0 && k.smem_bytes <= UINT32_MAX, "shared memory size out of range");
    bk.dynamic_smem_bytes = static_cast<uint32_t>(k.smem_bytes);
    bk.params = params;
    for (const lower::TensorMapUse& m : k.tensor_maps) {
      bundle::TensorMap tm;
      tm.param = static_cast<uint32_t>(m.param);
      for (int64_t b : m.box) tm.box.push_back(static_cast<uint32_t>(b));
      tm.swizzle_bytes = static_cast<uint32_t>(m.swizzle_bytes);
      bk.tensor_maps.push_back(std::move(tm));
    }
    p.kernels.push_back(std::move(bk));
  }
  return p;
}


// One program lowered and emitted for one target.
struct Lowered {
  size_t program = 0, target = 0;
  bundle::Program manifest;
  lower::GeneratedSource source;
};

struct CompileJob {
  const Lowered* lowered = nullptr;
  std::string arch;  // sm_XY[a] or compute_XY
  bundle::Variant variant;
  double seconds = 0;
  std::set<std::string> spilled;  // a cubin's kernels that ptxas reports spilling registers (entry symbols)
};

// Runs fn(i) for i < n on up to `jobs` threads; rethrows the first exception (in index order).
template <class F>
void parallel_for(size_t n, unsigned jobs, F&& fn) {
  std::vector<std::exception_ptr> errors(n);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < n;) {
      try {
        fn(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  unsigned threads = std::max(1u, std::min<unsigned>(jobs, static_cast<unsigned>(n)));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

void require_cuda(const targets::Target& t) {
  if (t.identity.vendor != "nvidia")
    throw UserError("target '" + t.identity.name + "' is an " + t.identity.vendor +
                    " GPU; `morgana compile` lowers to CUDA only for now (the HIP back end in targets/hip is not "
                    "written yet)");
}

}  // namespace

std::string emit_stage(const ir::Graph& program, const targets::Target& target, const std::string& stage) {
  if (stage == "mugraph") return ir::print(lower::tile_kernel_ops(program, target).graph);
  require_cuda(target);
  lower::LoweredProgram lp = cuda::lower(program, target);
  if (stage == "kernel-ir") return lower::print(lp);
  if (stage == "cuda") return cuda::emit_cuda(lp, target).text;
  throw UserError("unknown --emit stage '" + stage + "' (expected cuda, kernel-ir or mugraph)");
}

std::vector<targets::Target> nvidia_targets(const std::filesystem::path& dir) {
  std::vector<targets::Target> out;
  for (targets::Target& t : targets::load_all_targets(dir))
    if (t.identity.vendor == "nvidia") out.push_back(std::move(t));
  return out;
}

std::vector<targets::Target> default_targets(const std::vector<ir::Graph>& programs,
                                             const std::filesystem::path& dir) {
  std::vector<targets::Target> out;
  auto have = [&](const std::string& name) {
    return std::any_of(out.begin(), out.end(), [&](const targets::Target& t) { return t.identity.name == name; });
  };
  if (std::any_of(programs.begin(), programs.end(), [](const ir::Graph& g) { return g.for_targets().empty(); }))
    out = nvidia_targets(dir);
  for (const ir::Graph& g : programs)
    for (const std::string& name : g.for_targets())
      if (!have(name)) out.push_back(targets::find_target(name, dir));
  return out;
}

void check_targets_served(const std::vector<ir::Graph>& programs, const std::vector<targets::Target>& targets) {
  for (const targets::Target& t : targets) {
    if (std::any_of(programs.begin(), programs.end(),
                    [&](const ir::Graph& g) { return ir::serves_target(g, t.identity.name); }))
      continue;
    std::string lists;
    for (const ir::Graph& g : programs) {
      std::string names;
      for (const std::string& n : g.for_targets()) names += (names.empty() ? "" : ", ") + n;
      lists += (lists.empty() ? "" : "; ") + g.name() + " for [" + names + "]";
    }
    throw UserError("no program is for target '" + t.identity.name + "' (a program with a 'for' list is built only "
                    "for the targets it names: " + lists + ")");
  }
}

bundle::Bundle compile_programs(const std::vector<ir::Graph>& programs, const CompileOptions& options) {
  MG_CHECK(!options.targets.empty(), "compile_programs without targets");
  for (const targets::Target& t : options.targets) require_cuda(t);
  check_targets_served(programs, options.targets);
  unsigned jobs = options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::mutex progress_mutex;
  auto progress = [&](const std::string& line) {
    if (!options.progress) return;
    std::lock_guard<std::mutex> lock(progress_mutex);
    options.progress(line);
  };

  // Compiles one job's source for its arch; a cubin's job also learns which kernels spilled registers.
  auto compile_job = [&](CompileJob& job) {
    const Lowered& l = *job.lowered;
    const targets::Target& t = options.targets[l.target];
    auto start = std::chrono::steady_clock::now();
    std::vector<cuda::SourceHeader> headers;
    for (const lower::EmbeddedHeader& h : l.source.headers) headers.push_back({h.name, h.text});
    cuda::NvrtcInput in;
    in.source = l.source.text;
    in.file_name = programs[l.program].name() + ".cu";
    in.headers = headers;
    in.line_origin = l.source.line_origin;
    in.arch = job.arch;
    in.resource_report = cuda::is_cubin_arch(job.arch);
    cuda::NvrtcOutput out;
    try {
      out = cuda::nvrtc_compile(in);
    } catch (const UserError& e) {
      throw UserError("program '" + programs[l.program].name() + "' for target " + t.identity.name + ": " + e.message(),
                      e.loc());
    }
    job.variant.target = t.identity.name;
    job.variant.kind = cuda::is_cubin_arch(job.arch) ? bundle::VariantKind::cubin : bundle::VariantKind::ptx;
    job.variant.arch = job.arch;
    job.variant.payload = std::move(out.code);
    job.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string note;
    if (!job.spilled.empty()) {  // the second compile, with those kernels' short loops rolled
      for (const std::string& e : job.spilled) note += (note.empty() ? "; again, the short loops of " : ", ") + e;
      note += " rolled";
    }
    job.spilled.clear();
    for (const cuda::KernelResources& k : cuda::ptxas_resources(out.log))
      if (k.spill_store_bytes > 0) {
        job.spilled.insert(k.entry);
        note += "; " + k.entry + " spills " + std::to_string(k.spill_store_bytes) + " bytes";
      }
    char line[256];
    std::snprintf(line, sizeof line, "compiled %-24s for %-8s %-10s %7zu bytes  %.2f s",
                  programs[l.program].name().c_str(), t.identity.name.c_str(), job.arch.c_str(),
                  job.variant.payload.size(), job.seconds);
    progress(line + note);
  };

  // Lower and emit every (program, target) where the program is for the target.
  std::vector<Lowered> lowered;
  for (size_t p = 0; p < programs.size(); ++p)
    for (size_t t = 0; t < options.targets.size(); ++t)
      if (ir::serves_target(programs[p], options.targets[t].identity.name)) {
        check_fits_device(programs[p], options.targets[t]);  // before any lowering: a user error, named
        lowered.push_back({p, t, {}, {}});
      }
  std::vector<std::string> texts;  // each program's μGraph text, stored with every copy of it in the bundle
  for (const ir::Graph& g : programs) texts.push_back(ir::print(g));
  auto lower_and_emit = [&](Lowered& l, const std::set<std::string>& keep_rolled) {
    const ir::Graph& g = programs[l.program];
    const targets::Target& t = options.targets[l.target];
    try {
      lower::LowerOptions lo;
      lo.spill_to_global = options.spill_to_global;
      lo.keep_rolled = keep_rolled;
      lower::LoweredProgram lp = cuda::lower(g, t, lo);
      l.manifest = manifest(lp, texts[l.program]);
      l.source = cuda::emit_cuda(lp, t);
    } catch (const UserError& e) {
      throw UserError("program '" + g.name() + "' for target " + t.identity.name + ": " + e.message(), e.loc());
    }
  };
  parallel_for(lowered.size(), jobs, [&](size_t i) { lower_and_emit(lowered[i], {}); });

  // A cubin per (program, target). Where ptxas reports that a kernel spills registers, the program is lowered again
  // with that kernel's short loop rolled (lower::LowerOptions::keep_rolled) and compiled again if that changed it:
  // an unrolled loop's registers are not known before ptxas allocates them (H100: gqa_b8's flash kernel of 4
  // iterations spills 296 bytes unrolled, none rolled).
  std::vector<CompileJob> work;
  for (const Lowered& l : lowered) work.push_back({&l, options.targets[l.target].identity.arch, {}, 0});
  parallel_for(work.size(), jobs, [&](size_t i) { compile_job(work[i]); });
  std::vector<size_t> again;
  for (size_t i = 0; i < work.size(); ++i) {
    if (work[i].spilled.empty()) continue;
    Lowered& l = lowered[i];
    const std::string before = l.source.text;
    lower_and_emit(l, work[i].spilled);
    if (l.source.text != before) again.push_back(i);
  }
  parallel_for(again.size(), jobs, [&](size_t i) { compile_job(work[again[i]]); });

  // PTX of each program for its lowest CUDA arch.
  const size_t cubins = work.size();
  if (options.ptx_fallback) {
    for (size_t p = 0; p < programs.size(); ++p) {
      const Lowered* lowest = nullptr;
      for (const Lowered& l : lowered)
        if (l.program == p && (!lowest || cuda::cuda_arch_number(options.targets[l.target].identity.arch) <
                                              cuda::cuda_arch_number(options.targets[lowest->target].identity.arch)))
          lowest = &l;
      if (!lowest) continue;  // the program is for none of the targets
      work.push_back({lowest, "compute_" + std::to_string(cuda::cuda_arch_number(options.targets[lowest->target].identity.arch)),
                      {}, 0});
    }
  }
  parallel_for(work.size() - cubins, jobs, [&](size_t i) { compile_job(work[cubins + i]); });

  // Programs: one per (program, distinct manifest), holding the variants of every target that lowered to it.
  bundle::Bundle b;
  for (size_t p = 0; p < programs.size(); ++p) {
    std::vector<std::pair<bundle::Program, std::vector<const CompileJob*>>> groups;
    for (const CompileJob& job : work) {
      if (job.lowered->program != p) continue;
      auto same = std::find_if(groups.begin(), groups.end(),
                               [&](const auto& g) { return g.first == job.lowered->manifest; });
      if (same == groups.end()) {
        groups.emplace_back(job.lowered->manifest, std::vector<const CompileJob*>{});
        same = groups.end() - 1;
      }
      same->second.push_back(&job);
    }
    for (auto& [prog, jobs_of] : groups) {
      for (const CompileJob* job : jobs_of) {
        prog.variants.push_back(static_cast<uint32_t>(b.variants.size()));
        b.variants.push_back(job->variant);
      }
      b.programs.push_back(std::move(prog));
    }
  }
  if (std::optional<std::string> bad = bundle::validate(b)) MG_CHECK(false, "compile made an invalid bundle: " + *bad);
  return b;
}

}  // namespace morgana::frontend
