// The loader (loader.h): choosing code for the current context's GPU, loading it once per context, checking
// each kernel's launch against the live device, and launching.
#include "loader.h"

#include <array>
#include <cstdint>

#include "contract.h"
#include "select.h"

namespace morgana::runtime {
namespace {

using cuda::CUDA_SUCCESS;
using cuda::CUresult;
using cuda::Driver;

// Every buffer a launch takes starts at a multiple of this (the parameter contract, docs/runtime-api.md).
constexpr uintptr_t kBufferAlignment = 16;

uint64_t span_bytes(const bundle::Parameter& p) {
  // validate() bounded every span by 2^62 bytes when the bundle was read, so nothing here overflows.
  uint64_t last = 0;
  for (size_t i = 0; i < p.shape.size(); ++i) {
    if (p.shape[i] == 0) return 0;
    last += static_cast<uint64_t>(p.shape[i] - 1) * static_cast<uint64_t>(p.strides[i]);
  }
  return (last + 1) * bundle::size_bytes(p.dtype);
}

mg_program make_program(const Loader* loader, const bundle::Bundle& b, size_t index) {
  const bundle::Program& p = b.programs[index];
  mg_program m;
  m.loader = loader;
  m.index = index;
  // The contract makes kernel 0's parameter list the program's.
  for (const bundle::Parameter& param : p.kernels[0].params) {
    mg_param_info info{};
    info.name = param.name.c_str();
    info.role = static_cast<mg_role>(param.role);  // the C enums use the bundle format's codes
    info.dtype = static_cast<mg_dtype>(param.dtype);
    info.rank = static_cast<uint32_t>(param.shape.size());
    for (size_t d = 0; d < param.shape.size(); ++d) {
      info.shape[d] = param.shape[d];
      info.strides[d] = param.strides[d];
    }
    info.span_bytes = span_bytes(param);
    m.info.num_inputs += param.role == bundle::Role::input;
    m.info.num_outputs += param.role == bundle::Role::output;
    m.params.push_back(info);
  }
  m.info.name = p.name.c_str();
  m.info.mugraph = p.mugraph.c_str();
  m.info.num_params = m.params.size();
  m.info.workspace_bytes = p.workspace_bytes;
  m.info.num_kernels = p.kernels.size();
  m.info.num_variants = p.variants.size();
  for (uint32_t v : p.variants) {
    const bundle::Variant& var = b.variants[v];
    m.variants.push_back(mg_variant_info{var.target.c_str(), static_cast<mg_variant_kind>(var.kind),
                                         var.arch.c_str(), var.payload.size()});
  }
  return m;
}

std::string dims(const bundle::Dim3& d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}

std::string dims(const int (&d)[3]) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
}

// "NVIDIA H200 (sm_90)"
std::string device_label(const cuda::Device& d) {
  return d.name + " (sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor) + ")";
}

DeviceTarget target_of(const cuda::Device& d) {
  return DeviceTarget{Vendor::nvidia, d.cc_major, d.cc_minor, {}};
}

// The PTX compiler's log as one line.
std::string one_line(const char* log) {
  std::string out;
  for (const char* c = log; *c != '\0' && out.size() < 1000; ++c) {
    if (*c == '\n' || *c == '\r') {
      if (!out.empty() && out.back() != ' ') out += "; ";
    } else {
      out += *c;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
  return out;
}

// The driver (loaded on first use) and the calling thread's current context: what every launch-side call starts
// from.
Error driver_and_context(const Driver** d, cuda::CurrentContext* current) {
  Error e;
  *d = cuda::load_driver(&e);
  if (*d == nullptr) return e;
  return cuda::current_context(**d, current);
}

}  // namespace

Loader::Loader(bundle::Bundle model) : model_(std::move(model)) {
  programs_.reserve(model_.programs.size());  // mg_program pointers handed out must never move
  for (size_t i = 0; i < model_.programs.size(); ++i) programs_.push_back(make_program(this, model_, i));
}

Loader::~Loader() {
  if (contexts_.empty()) return;
  const Driver* d = cuda::load_driver(nullptr);  // loaded: a state exists only after the driver was used
  if (d == nullptr) return;
  for (auto& [key, state] : contexts_) {
    if (state->modules.empty()) continue;
    // A destroyed context took its modules with it, and its handle may since belong to a new context: unload
    // only where the context with this id is still alive. Without cuCtxGetId (drivers before CUDA 12.0) the
    // handle is all there is; unloading in a dead context then fails harmlessly.
    if (d->cuCtxGetId != nullptr) {
      unsigned long long id = 0;
      if (d->cuCtxGetId(state->context, &id) != CUDA_SUCCESS || id != state->id) continue;
    }
    if (d->cuCtxPushCurrent_v2(state->context) != CUDA_SUCCESS) continue;
    for (auto& [variant, module] : state->modules) d->cuModuleUnload(module);
    cuda::CUcontext popped = nullptr;
    d->cuCtxPopCurrent_v2(&popped);
  }
}

Error Loader::check(const bundle::Bundle& model) {
  for (size_t i = 0; i < model.programs.size(); ++i) {
    if (auto problem = check_parameter_contract(model.programs[i]))
      return failure(MG_ERROR_BAD_BUNDLE, "program " + std::to_string(i) + " (" +
                                              bundle::printable(model.programs[i].name) + "): " + *problem);
  }
  return {};
}

Error Loader::check_arguments(const mg_program& p, void* const* args, size_t nargs, void* workspace) const {
  // Messages are built only on failure: this runs on every launch.
  auto bad = [&](const std::string& what) {
    return failure(MG_ERROR_INVALID_ARGUMENT, "program '" + std::string(p.info.name) + "'" + what);
  };
  const size_t expected = p.info.num_inputs + p.info.num_outputs;
  if (nargs != expected) {
    auto names = [&](const char* role, size_t from, size_t to) {
      std::string s = from == to ? "" : role;
      for (size_t i = from; i < to; ++i) s += (i > from ? ", " : " ") + std::string(p.params[i].name);
      return s;
    };
    std::string inputs = names("inputs", 0, p.info.num_inputs);
    std::string outputs = names("outputs", p.info.num_inputs, expected);
    return bad(" takes " + std::to_string(expected) + (expected == 1 ? " argument (" : " arguments (") +
               inputs + (inputs.empty() || outputs.empty() ? "" : "; ") + outputs + "), got " +
               std::to_string(nargs) +
               (p.info.workspace_bytes > 0 ? " (the workspace is passed on its own, not in args)" : ""));
  }
  if (nargs > 0 && args == nullptr) return bad(": args is NULL");
  for (size_t i = 0; i < nargs; ++i) {
    if (args[i] == nullptr && p.params[i].span_bytes > 0)
      return bad(": argument " + std::to_string(i) + " ('" + p.params[i].name +
                 "') is NULL; it needs a device buffer of " + std::to_string(p.params[i].span_bytes) +
                 " bytes");
  }
  // Generated kernels move 16 bytes per access where the shapes allow (docs/lowering.md, "The parameter
  // contract"); cudaMalloc and PyTorch's allocator give 256-byte alignment, a view at an odd offset may not.
  for (size_t i = 0; i < nargs; ++i)
    if (reinterpret_cast<uintptr_t>(args[i]) % kBufferAlignment != 0)
      return bad(": argument " + std::to_string(i) + " ('" + p.params[i].name + "') is not " +
                 std::to_string(kBufferAlignment) + "-byte aligned (a view at an offset? pass a contiguous copy)");
  if (p.info.workspace_bytes > 0 && workspace == nullptr)
    return bad(" needs a workspace of " + std::to_string(p.info.workspace_bytes) + " bytes, got NULL");
  if (reinterpret_cast<uintptr_t>(workspace) % kBufferAlignment != 0)
    return bad(": the workspace is not " + std::to_string(kBufferAlignment) + "-byte aligned");
  return {};
}

Error Loader::state_for(const Driver& d, const cuda::CurrentContext& current, ContextState** out) const {
  const Key key{current.context, current.id};
  if (auto it = contexts_.find(key); it != contexts_.end()) {  // load_mu_ is held: no one else inserts
    *out = it->second.get();
    return {};
  }
  auto state = std::make_unique<ContextState>();
  state->context = current.context;
  state->id = current.id;
  if (Error e = cuda::describe_device(d, current.device, &state->device); !e.ok()) return e;
  state->programs.resize(programs_.size());
  *out = state.get();
  std::unique_lock lock(mu_);
  contexts_.emplace(key, std::move(state));
  return {};
}

Error Loader::resolved(const mg_program& p, const Resolved** out) const {
  const Driver* d = nullptr;
  cuda::CurrentContext current;
  Error e = driver_and_context(&d, &current);
  if (!e.ok()) return e;
  {
    std::shared_lock lock(mu_);
    auto it = contexts_.find(Key{current.context, current.id});
    if (it != contexts_.end() && it->second->programs[p.index] != nullptr) {
      *out = it->second->programs[p.index].get();
      return {};
    }
  }
  std::lock_guard load(load_mu_);
  ContextState* state = nullptr;
  if (e = state_for(*d, current, &state); !e.ok()) return e;
  if (state->programs[p.index] == nullptr) {  // another thread may have resolved it while we waited
    std::unique_ptr<Resolved> r;
    if (e = resolve(*d, *state, p.index, &r); !e.ok()) return e;
    std::unique_lock lock(mu_);
    state->programs[p.index] = std::move(r);
  }
  *out = state->programs[p.index].get();
  return {};
}

Error Loader::resolve(const Driver& d, ContextState& state, size_t index,
                      std::unique_ptr<Resolved>* out) const {
  const bundle::Program& program = model_.programs[index];
  std::vector<Candidate> candidates;
  for (uint32_t v : program.variants) {
    const bundle::Variant& var = model_.variants[v];
    candidates.push_back(Candidate{var.kind, var.arch, var.target});
  }
  Selection chosen = select_variant(target_of(state.device), candidates, program.name);
  if (!chosen.index) return failure(MG_ERROR_NO_VARIANT, chosen.error);

  auto r = std::make_unique<Resolved>();
  r->variant = *chosen.index;
  cuda::CUmodule module = nullptr;
  if (Error e = load_module(d, state, program.variants[r->variant], &module); !e.ok()) {
    e.message = "program '" + program.name + "': " + e.message;
    return e;
  }
  r->kernels.resize(program.kernels.size());
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    if (Error e = prepare_kernel(d, state, program, k, module, &r->kernels[k]); !e.ok()) return e;
  }
  *out = std::move(r);
  return {};
}

Error Loader::load_module(const Driver& d, ContextState& state, size_t variant, cuda::CUmodule* out) const {
  if (auto it = state.modules.find(variant); it != state.modules.end()) {
    *out = it->second;
    return {};
  }
  const bundle::Variant& v = model_.variants[variant];
  // The driver reads PTX as a NUL-terminated string (a cubin carries its own length); a payload written
  // without the terminator is copied with one.
  std::vector<uint8_t> terminated;
  const void* image = v.payload.data();
  if (v.kind == bundle::VariantKind::ptx && v.payload.back() != 0) {
    terminated.reserve(v.payload.size() + 1);
    terminated.assign(v.payload.begin(), v.payload.end());
    terminated.push_back(0);
    image = terminated.data();
  }
  std::array<char, 4096> log{};
  int options[] = {cuda::CU_JIT_ERROR_LOG_BUFFER, cuda::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size() - 1))};
  cuda::CUmodule module = nullptr;
  if (CUresult r = d.cuModuleLoadDataEx(&module, image, 2, options, values); r != CUDA_SUCCESS) {
    // The driver refusing code selection accepted means our rules and the driver's disagree: say so plainly.
    Error e = d.error(r == cuda::CUDA_ERROR_NO_BINARY_FOR_GPU ? MG_ERROR_NO_VARIANT : MG_ERROR_DRIVER, r,
                      "loading " + bundle::describe_variant(model_, variant) + " on " +
                          device_label(state.device) + " (cuModuleLoadDataEx)");
    log.back() = 0;
    if (log[0] != 0) e.message += "; the driver's log: " + one_line(log.data());
    return e;
  }
  state.modules.emplace(variant, module);
  *out = module;
  return {};
}

Error Loader::prepare_kernel(const Driver& d, const ContextState& state, const bundle::Program& program,
                             size_t k, cuda::CUmodule module, KernelLaunch* out) const {
  const bundle::Kernel& kernel = program.kernels[k];
  const cuda::Device& dev = state.device;
  const std::string subject = "kernel " + std::to_string(k) + " (" + kernel.name + ") of program '" +
                              program.name + "' on " + device_label(dev);
  cuda::CUfunction f = nullptr;
  if (CUresult r = d.cuModuleGetFunction(&f, module, kernel.name.c_str()); r != CUDA_SUCCESS) {
    if (r == cuda::CUDA_ERROR_NOT_FOUND)
      return failure(MG_ERROR_BAD_BUNDLE,
                     subject + ": the code object has no entry point '" + kernel.name + "'");
    return d.error(MG_ERROR_DRIVER, r, subject + ": cuModuleGetFunction");
  }
  int kernel_max_threads = 0, static_smem = 0, regs = 0;
  for (auto [attribute, value] :
       {std::pair{cuda::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &kernel_max_threads},
        std::pair{cuda::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &static_smem},
        std::pair{cuda::CU_FUNC_ATTRIBUTE_NUM_REGS, &regs}}) {
    if (CUresult r = d.cuFuncGetAttribute(value, attribute, f); r != CUDA_SUCCESS)
      return d.error(MG_ERROR_DRIVER, r, subject + ": cuFuncGetAttribute(" + std::to_string(attribute) + ")");
  }

  const uint32_t block[3] = {kernel.block.x, kernel.block.y, kernel.block.z};
  const uint32_t grid[3] = {kernel.grid.x, kernel.grid.y, kernel.grid.z};
  for (int i = 0; i < 3; ++i) {
    if (block[i] > static_cast<uint32_t>(dev.max_block[i]))
      return failure(MG_ERROR_RESOURCES, subject + ": block " + dims(kernel.block) +
                                             " exceeds the device's largest block " + dims(dev.max_block));
  }
  for (int i = 0; i < 3; ++i) {
    if (grid[i] > static_cast<uint32_t>(dev.max_grid[i]))
      return failure(MG_ERROR_RESOURCES, subject + ": grid " + dims(kernel.grid) +
                                             " exceeds the device's largest grid " + dims(dev.max_grid));
  }
  const uint64_t threads = uint64_t{block[0]} * block[1] * block[2];
  if (threads > static_cast<uint64_t>(dev.max_threads_per_block))
    return failure(MG_ERROR_RESOURCES, subject + ": " + std::to_string(threads) +
                                           " threads per block, the device allows at most " +
                                           std::to_string(dev.max_threads_per_block));
  if (threads > static_cast<uint64_t>(kernel_max_threads))
    return failure(MG_ERROR_RESOURCES, subject + ": " + std::to_string(threads) +
                                           " threads per block, but with " + std::to_string(regs) +
                                           " registers per thread it can run at most " +
                                           std::to_string(kernel_max_threads));
  const uint64_t smem = uint64_t{kernel.dynamic_smem_bytes} + static_cast<uint64_t>(static_smem);
  if (smem > static_cast<uint64_t>(dev.smem_per_block_optin))
    return failure(MG_ERROR_RESOURCES,
                   subject + ": needs " + std::to_string(smem) + " bytes of shared memory per block (" +
                       std::to_string(kernel.dynamic_smem_bytes) + " dynamic + " +
                       std::to_string(static_smem) + " static), the device allows at most " +
                       std::to_string(dev.smem_per_block_optin));
  // Beyond the default per-block amount a kernel must opt in before its launch, or the launch fails.
  if (smem > static_cast<uint64_t>(dev.smem_per_block)) {
    if (CUresult r = d.cuFuncSetAttribute(f, cuda::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                          static_cast<int>(kernel.dynamic_smem_bytes));
        r != CUDA_SUCCESS)
      return d.error(MG_ERROR_DRIVER, r,
                     subject + ": raising its dynamic shared memory limit to " +
                         std::to_string(kernel.dynamic_smem_bytes) + " bytes (cuFuncSetAttribute)");
  }
  *out = KernelLaunch{f, kernel.grid, kernel.block, kernel.dynamic_smem_bytes};
  return {};
}

Error Loader::select(std::string_view name, const mg_program** out) const {
  std::vector<size_t> same;
  for (size_t i = 0; i < model_.programs.size(); ++i)
    if (model_.programs[i].name == name) same.push_back(i);
  if (same.empty()) {
    std::string names;
    for (size_t i = 0; i < model_.programs.size(); ++i) {
      const std::string& n = model_.programs[i].name;
      if (names.find("'" + n + "'") != std::string::npos) continue;
      names += (names.empty() ? "'" : ", '") + n + "'";
    }
    return failure(MG_ERROR_NOT_FOUND,
                   "no program '" + bundle::printable(name) + "' in the bundle (it has " + names + ")");
  }

  const Driver* d = nullptr;
  cuda::CurrentContext current;
  Error e = driver_and_context(&d, &current);
  if (!e.ok()) return e;
  {
    std::shared_lock lock(mu_);
    auto it = contexts_.find(Key{current.context, current.id});
    if (it != contexts_.end()) {
      if (auto found = it->second->by_name.find(name); found != it->second->by_name.end()) {
        *out = &programs_[found->second];
        return {};
      }
    }
  }
  std::lock_guard load(load_mu_);
  ContextState* state = nullptr;
  if (e = state_for(*d, current, &state); !e.ok()) return e;
  // One candidate list over every program of the name: the best variant decides the program.
  std::vector<Candidate> candidates;
  std::vector<size_t> owner;
  for (size_t p : same) {
    for (uint32_t v : model_.programs[p].variants) {
      const bundle::Variant& var = model_.variants[v];
      candidates.push_back(Candidate{var.kind, var.arch, var.target});
      owner.push_back(p);
    }
  }
  Selection chosen = select_variant(target_of(state->device), candidates, name);
  if (!chosen.index) return failure(MG_ERROR_NO_VARIANT, chosen.error);
  const size_t program = owner[*chosen.index];
  {
    std::unique_lock lock(mu_);
    state->by_name.emplace(std::string(name), program);
  }
  *out = &programs_[program];
  return {};
}

Error Loader::prepare(const mg_program& p, size_t* variant) const {
  const Resolved* r = nullptr;
  if (Error e = resolved(p, &r); !e.ok()) return e;
  if (variant != nullptr) *variant = r->variant;
  return {};
}

namespace {

// The copy engine's map of the tensor the caller passed for parameter m.param (cuTensorMapEncodeTiled): the
// parameter's shape and strides (innermost first, strides in bytes past the first), the bundle's box and swizzle,
// zeros outside the tensor. L2 fetches whole 128-byte lines: measured on the H100 (bench/notes-fast-kernels-1.md,
// session 11), 256-byte promotion cost decode attention's P·V (boxes of 128-byte rows of 256-byte rows) 1.7 us and
// none cost gated_mlp 0.7 us.
Error encode_tensor_map(const Driver& d, const bundle::Kernel& k, const bundle::TensorMap& m, void* const* args,
                        cuda::CUtensorMap* out) {
  if (d.cuTensorMapEncodeTiled == nullptr)
    return failure(MG_ERROR_LAUNCH, "the NVIDIA driver has no cuTensorMapEncodeTiled (the kernel uses the copy "
                                    "engine; install a driver for CUDA 12 or later)");
  const bundle::Parameter& par = k.params[m.param];
  const uint32_t rank = static_cast<uint32_t>(par.shape.size());
  const uint64_t es = bundle::size_bytes(par.dtype);
  std::array<uint64_t, bundle::kMaxTensorMapRank> dims{}, strides{};
  std::array<uint32_t, bundle::kMaxTensorMapRank> box{}, element_strides{};
  for (uint32_t i = 0; i < rank; ++i) {
    const uint32_t d_in = rank - 1 - i;  // innermost first
    dims[i] = static_cast<uint64_t>(par.shape[d_in]);
    box[i] = m.box[d_in];
    element_strides[i] = 1;
    if (i > 0) strides[i - 1] = static_cast<uint64_t>(par.strides[d_in]) * es;
  }
  const int type = par.dtype == bundle::DType::f16    ? cuda::CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                   : par.dtype == bundle::DType::bf16 ? cuda::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                      : cuda::CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  const int swizzle = m.swizzle_bytes == 32 ? 1 : m.swizzle_bytes == 64 ? 2 : m.swizzle_bytes == 128 ? 3 : 0;
  CUresult r = d.cuTensorMapEncodeTiled(out, type, rank, args[m.param], dims.data(), strides.data(), box.data(),
                                        element_strides.data(), 0, swizzle, cuda::CU_TENSOR_MAP_L2_PROMOTION_L2_128B, 0);
  if (r != CUDA_SUCCESS) return d.error(MG_ERROR_LAUNCH, r, "cuTensorMapEncodeTiled of parameter '" + par.name + "'");
  return {};
}

}  // namespace

Error Loader::launch(const mg_program& p, void* stream, void* const* args, size_t nargs,
                     void* workspace) const {
  if (Error e = check_arguments(p, args, nargs, workspace); !e.ok()) return e;
  const Resolved* r = nullptr;
  if (Error e = resolved(p, &r); !e.ok()) return e;
  const Driver& d = *cuda::load_driver(nullptr);  // resolved() succeeded, so the driver is loaded

  // kernelParams: a pointer to each argument's value, in the program's parameter order (the contract makes it
  // every kernel's order), the workspace last.
  std::array<cuda::CUdeviceptr, bundle::kMaxParamsPerKernel> values;
  std::array<void*, bundle::kMaxParamsPerKernel + 1 + bundle::kMaxTensorMapsPerKernel> pointers;
  size_t n = 0;
  for (; n < nargs; ++n) values[n] = reinterpret_cast<uintptr_t>(args[n]);
  if (p.info.workspace_bytes > 0) values[n++] = reinterpret_cast<uintptr_t>(workspace);
  for (size_t i = 0; i < n; ++i) pointers[i] = &values[i];

  const size_t program_params = n;
  for (size_t k = 0; k < r->kernels.size(); ++k) {
    const KernelLaunch& kl = r->kernels[k];
    // The copy engine's tensor maps of this call's tensors, by value after the parameters.
    const bundle::Kernel& bk = model_.programs[p.index].kernels[k];
    std::array<cuda::CUtensorMap, bundle::kMaxTensorMapsPerKernel> maps;
    n = program_params;
    for (size_t m = 0; m < bk.tensor_maps.size(); ++m) {
      if (Error e = encode_tensor_map(d, bk, bk.tensor_maps[m], args, &maps[m]); !e.ok()) {
        e.message = "kernel " + std::to_string(k) + " (" + bk.name + ") of program '" + p.info.name + "', tensor map " +
                    std::to_string(m) + ": " + e.message;
        return e;
      }
      pointers[n++] = &maps[m];
    }
    CUresult res =
        d.cuLaunchKernel(kl.function, kl.grid.x, kl.grid.y, kl.grid.z, kl.block.x, kl.block.y, kl.block.z,
                         kl.dynamic_smem, static_cast<cuda::CUstream>(stream), pointers.data(), nullptr);
    if (res != CUDA_SUCCESS)
      return d.error(MG_ERROR_LAUNCH, res,
                     "launching kernel " + std::to_string(k) + " (" +
                         model_.programs[p.index].kernels[k].name + ") of program '" + p.info.name + "'" +
                         (k > 0 ? " (kernels 0.." + std::to_string(k - 1) + " are queued)" : ""));
  }
  return {};
}

}  // namespace morgana::runtime
