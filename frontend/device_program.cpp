#include "frontend/device_program.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "ir/diagnostic.h"
#include "ir/parser.h"
#include "morgana/runtime.h"
#include "runtime/cuda_driver.h"
#include "verify/float_check.h"
#include "verify/float_domain.h"

namespace morgana::frontend {

namespace {

namespace cu = runtime::cuda;

std::string fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

// A failed runtime call: the user's problem (no driver, no GPU, wrong bundle), so a UserError with its
// message.
void check_status(mg_status s, const char* what) {
  if (s != MG_OK)
    throw UserError(std::string(what) + ": " + mg_last_error() + " [" + mg_status_name(s) + "]");
}

void check_error(const runtime::Error& e) {
  if (!e.ok()) throw UserError(e.message);
}

void drv(const cu::Driver* d, cu::CUresult r, const char* what) {
  if (r != cu::CUDA_SUCCESS) check_error(d->error(MG_ERROR_DRIVER, r, what));
}

ir::DType ir_dtype(mg_dtype t) {
  switch (t) {
    case MG_DTYPE_F16:
      return ir::DType::f16;
    case MG_DTYPE_BF16:
      return ir::DType::bf16;
    default:
      return ir::DType::f32;
  }
}

// Device memory that frees itself (the context outlives it: it is the process's primary context).
struct DeviceBuffer {
  const cu::Driver* d = nullptr;
  cu::CUdeviceptr ptr = 0;
  size_t bytes = 0;
  DeviceBuffer(const cu::Driver* driver, size_t n) : d(driver), bytes(std::max<size_t>(n, 1)) {
    if (cu::CUresult r = d->cuMemAlloc_v2(&ptr, bytes); r != cu::CUDA_SUCCESS)
      check_error(d->error(MG_ERROR_DRIVER, r, "cuMemAlloc(" + std::to_string(bytes) + " bytes)"));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr) d->cuMemFree_v2(ptr);
  }
  void* arg() const { return reinterpret_cast<void*>(ptr); }
};

// The program name to run: the one given, or the bundle's only one.
std::string pick_name(mg_bundle* b, const std::string& wanted) {
  std::set<std::string> names;
  for (size_t i = 0; i < mg_bundle_program_count(b); ++i) {
    const mg_program* p = nullptr;
    mg_program_info info{};
    check_status(mg_bundle_program(b, i, &p), "reading the bundle");
    check_status(mg_program_describe(p, &info), "reading the bundle");
    names.insert(info.name);
  }
  std::string all;
  for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
  if (!wanted.empty()) {
    if (!names.count(wanted))
      throw UserError("the bundle has no program '" + wanted + "' (it has: " + all + ")");
    return wanted;
  }
  if (names.size() != 1) {
    throw UserError("the bundle has " + std::to_string(names.size()) + " programs (" + all +
                    "); choose one with --program NAME");
  }
  return *names.begin();
}

// Events that destroy themselves.
struct EventPair {
  const cu::Driver* d;
  cu::CUevent start = nullptr, stop = nullptr;
  explicit EventPair(const cu::Driver* driver) : d(driver) {
    drv(d, d->cuEventCreate(&start, 0), "cuEventCreate");
    drv(d, d->cuEventCreate(&stop, 0), "cuEventCreate");
  }
  ~EventPair() {
    d->cuEventDestroy_v2(start);
    d->cuEventDestroy_v2(stop);
  }
  // Microseconds between start and stop, after waiting for stop.
  double elapsed_us() const {
    drv(d, d->cuEventSynchronize(stop), "cuEventSynchronize");
    float ms = 0;
    drv(d, d->cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
    return ms * 1000.0;
  }
};

Timing summarize(std::vector<double> us, int sets) {
  std::sort(us.begin(), us.end());
  Timing t;
  t.samples = static_cast<int>(us.size());
  t.sets = sets;
  if (!us.empty()) {
    t.median_us = us[us.size() / 2];
    t.min_us = us.front();
  }
  return t;
}

}  // namespace

struct DeviceProgram::State {
  mg_bundle* bundle = nullptr;
  const cu::Driver* d = nullptr;
  mg_device_info dev{};
  int l2_bytes = 0;
  const mg_program* prog = nullptr;
  mg_program_info info{};
  mg_variant_info vinfo{};
  std::vector<mg_param_info> params;  // inputs, then outputs
  ir::Graph graph;                    // the program's μGraph, as the bundle holds it
  std::vector<verify::FloatArray> inputs;
  std::vector<std::vector<uint8_t>> input_bytes;       // the inputs as the device holds them
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;  // set 0: the checked one
  std::unique_ptr<DeviceBuffer> workspace;

  ~State() { mg_bundle_close(bundle); }
  void* ws() const { return workspace ? workspace->arg() : nullptr; }

  // Device buffers of one input set: the inputs uploaded, the outputs poisoned with 0xFF bytes (NaN in every
  // float type), so that an element no kernel writes shows up as a mismatch.
  std::vector<void*> allocate_set(std::vector<std::unique_ptr<DeviceBuffer>>& into) {
    std::vector<void*> args;
    for (size_t i = 0; i < params.size(); ++i) {
      into.push_back(std::make_unique<DeviceBuffer>(d, params[i].span_bytes));
      args.push_back(into.back()->arg());
      if (i < info.num_inputs)
        drv(d, d->cuMemcpyHtoD_v2(into.back()->ptr, input_bytes[i].data(), input_bytes[i].size()),
            "cuMemcpyHtoD");
      else
        drv(d, d->cuMemsetD8_v2(into.back()->ptr, 0xff, into.back()->bytes), "cuMemsetD8");
    }
    return args;
  }
  std::vector<void*> set0_args() const {
    std::vector<void*> args;
    for (size_t i = 0; i < params.size(); ++i) args.push_back(buffers[i]->arg());
    return args;
  }
  void launch(void* stream, const std::vector<void*>& args) const {
    check_status(mg_program_launch(prog, stream, args.data(), args.size(), ws()), "launching");
  }
};

DeviceProgram::DeviceProgram(std::unique_ptr<State> s) : s_(std::move(s)) {}
DeviceProgram::~DeviceProgram() = default;

namespace {

// Everything after the bundle is open: the device, the program's code, its μGraph and the seeded inputs.
void load(DeviceProgram::State& s, const std::string& program, int device, uint64_t seed) {
  std::string name = pick_name(s.bundle, program);
  runtime::Error err;
  s.d = cu::load_driver(&err);
  if (!s.d) check_error(err);
  cu::CUcontext ctx = nullptr;
  check_error(cu::use_primary_context(*s.d, device, &ctx));
  check_status(mg_device_describe(-1, &s.dev), "reading the device");
  cu::CUdevice dev = 0;
  if (s.d->cuCtxGetDevice(&dev) == cu::CUDA_SUCCESS)
    s.d->cuDeviceGetAttribute(&s.l2_bytes, cu::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev);

  check_status(mg_bundle_select_program(s.bundle, name.c_str(), &s.prog), "choosing the code");
  size_t variant = 0;
  check_status(mg_program_prepare(s.prog, &variant), "loading the code");
  check_status(mg_program_describe(s.prog, &s.info), "reading the program");
  check_status(mg_program_variant(s.prog, variant, &s.vinfo), "reading the program");

  ir::Module m = ir::parse_module(s.info.mugraph, std::string(s.info.name) + " (from the bundle)");
  MG_CHECK(m.programs.size() == 1, "a bundle program holds one μGraph");
  s.graph = std::move(m.programs[0]);
  const ir::Graph& g = s.graph;
  MG_CHECK(g.inputs().size() == s.info.num_inputs && g.outputs().size() == s.info.num_outputs,
           "the bundle's μGraph does not match its parameters");
  s.inputs = verify::random_inputs(g, seed);
  s.params.resize(s.info.num_inputs + s.info.num_outputs);
  for (size_t i = 0; i < s.params.size(); ++i) {
    check_status(mg_program_param(s.prog, i, &s.params[i]), "reading the program");
    if (i >= s.info.num_inputs) continue;
    ir::DType t = ir_dtype(s.params[i].dtype);
    MG_CHECK(t == g.type(g.inputs()[i]).dtype, "input type differs from the μGraph's");
    std::vector<uint8_t> host(s.params[i].span_bytes);
    size_t width = static_cast<size_t>(ir::dtype_bytes(t));
    for (size_t k = 0; k < s.inputs[i].data.size(); ++k)
      ir::encode_element(s.inputs[i].data[k], t, &host[k * width]);
    s.input_bytes.push_back(std::move(host));
  }
  s.allocate_set(s.buffers);
  if (s.info.workspace_bytes) {
    s.workspace = std::make_unique<DeviceBuffer>(s.d, s.info.workspace_bytes);
    drv(s.d, s.d->cuMemsetD8_v2(s.workspace->ptr, 0xff, s.workspace->bytes), "cuMemsetD8");
  }
}

}  // namespace

std::unique_ptr<DeviceProgram> DeviceProgram::open_file(const std::string& path, const std::string& program,
                                                        int device, uint64_t seed) {
  auto s = std::make_unique<State>();
  check_status(mg_bundle_open(path.c_str(), &s->bundle), "opening the bundle");
  load(*s, program, device, seed);
  return std::unique_ptr<DeviceProgram>(new DeviceProgram(std::move(s)));
}

std::unique_ptr<DeviceProgram> DeviceProgram::open_bytes(const std::vector<uint8_t>& bundle,
                                                         const std::string& program, int device,
                                                         uint64_t seed) {
  auto s = std::make_unique<State>();
  check_status(mg_bundle_open_memory(bundle.data(), bundle.size(), &s->bundle), "opening the bundle");
  load(*s, program, device, seed);
  return std::unique_ptr<DeviceProgram>(new DeviceProgram(std::move(s)));
}


std::string DeviceProgram::device_line() const {
  const mg_device_info& dev = s_->dev;
  return fmt("device %d: %s (%s, %d SMs), driver %d.%d", dev.ordinal, dev.name, dev.arch, dev.sm_count,
             dev.driver_version / 1000, dev.driver_version % 1000 / 10);
}

std::string DeviceProgram::device_name() const {
  return s_->dev.name;
}

std::string DeviceProgram::program_line() const {
  return fmt("program %s: %zu kernel(s), workspace %llu bytes; running %s %s (compiled for %s)",
             s_->info.name, s_->info.num_kernels, static_cast<unsigned long long>(s_->info.workspace_bytes),
             s_->vinfo.kind == MG_VARIANT_PTX ? "PTX" : "cubin", s_->vinfo.arch, s_->vinfo.target);
}

void DeviceProgram::launch_once() {
  s_->launch(nullptr, s_->set0_args());
  drv(s_->d, s_->d->cuCtxSynchronize(), "running the kernels (cuCtxSynchronize)");
}

CheckResult DeviceProgram::check() {
  State& s = *s_;
  const ir::Graph& g = s.graph;
  launch_once();

  // Two references: `device` precision (f32 arithmetic, every kernel-level tensor rounded to its type as the
  // GPU stores it) decides pass or fail, since it computes what the program computes; f64 shows how far that
  // is from exact arithmetic (intermediates stored in f16/bf16 cost accuracy the compiler cannot recover).
  std::vector<verify::FloatArray> want = verify::eval_float(g, s.inputs, verify::Precision::device);
  std::vector<verify::FloatArray> exact = verify::eval_float(g, s.inputs, verify::Precision::f64);
  CheckResult res;
  for (size_t out = 0; out < s.info.num_outputs; ++out) {
    const mg_param_info& p = s.params[s.info.num_inputs + out];
    ir::DType t = ir_dtype(p.dtype);
    std::vector<uint8_t> host(p.span_bytes);
    drv(s.d, s.d->cuMemcpyDtoH_v2(host.data(), s.buffers[s.info.num_inputs + out]->ptr, host.size()),
        "cuMemcpyDtoH");
    const verify::FloatArray& r = want[out];
    verify::OutputTolerance tol = verify::OutputTolerance::of(r.data, t);
    double worst = 0, max_abs = 0, max_abs_exact = 0;
    size_t worst_at = 0, bad = 0;
    size_t width = static_cast<size_t>(ir::dtype_bytes(t));
    for (size_t k = 0; k < r.data.size(); ++k) {
      double c = ir::decode_element(&host[k * width], t), ref = r.data[k];
      double e = std::isfinite(c) ? tol.error(c, ref) : INFINITY;
      if (!std::isfinite(ref)) e = (c == ref || (std::isnan(c) && std::isnan(ref))) ? 0 : INFINITY;
      if (std::isfinite(c) && std::isfinite(ref)) max_abs = std::max(max_abs, std::fabs(c - ref));
      if (std::isfinite(c) && std::isfinite(exact[out].data[k]))
        max_abs_exact = std::max(max_abs_exact, std::fabs(c - exact[out].data[k]));
      bad += e > 1;
      if (e > worst || k == 0) {
        worst = e;
        worst_at = k;
      }
    }
    bool ok = bad == 0;
    res.pass = res.pass && ok;
    res.worst = std::max(res.worst, worst);
    ir::TensorId ot = g.outputs()[out];
    double got = r.data.empty() ? 0 : ir::decode_element(&host[worst_at * width], t);
    res.lines.push_back(
        fmt("output %zu %s %s: %s  max |gpu - cpu| %.3g (vs f64: %.3g), worst %s: gpu %.6g, cpu %.6g (%.2f "
            "of the "
            "tolerance)%s",
            out, p.name, g.type(ot).str().c_str(), ok ? "ok" : "MISMATCH", max_abs, max_abs_exact,
            g.type(ot).index_str(static_cast<int64_t>(worst_at)).c_str(), got,
            r.data.empty() ? 0.0 : r.data[worst_at], worst,
            ok ? "" : fmt("; %zu of %zu elements outside", bad, r.data.size()).c_str()));
  }
  res.lines.push_back(res.pass
                          ? "check passed: every output matches the CPU reference (device precision) within "
                            "its dtype's tolerance"
                          : "check FAILED");
  return res;
}

Timing DeviceProgram::time_launches(int warmup, int iterations) {
  State& s = *s_;
  const std::vector<void*> args = s.set0_args();
  for (int i = 0; i < warmup; ++i) s.launch(nullptr, args);
  EventPair ev(s.d);
  std::vector<double> us;
  for (int i = 0; i < iterations; ++i) {
    drv(s.d, s.d->cuEventRecord(ev.start, nullptr), "cuEventRecord");
    s.launch(nullptr, args);
    drv(s.d, s.d->cuEventRecord(ev.stop, nullptr), "cuEventRecord");
    us.push_back(ev.elapsed_us());
  }
  return summarize(std::move(us), 1);
}

Timing DeviceProgram::time_replays(int warmup, int replays) {
  State& s = *s_;
  const cu::Driver* d = s.d;
  if (!d->has_graphs())
    throw UserError("timing in a CUDA graph needs a driver with CUDA graphs (CUDA 12 or later)");
  // Input sets until their bytes exceed twice the L2 cache, so no launch finds its inputs there; set 0 is the
  // checked one, the others hold the same values.
  size_t set_bytes = 0;
  for (const mg_param_info& p : s.params) set_bytes += p.span_bytes;
  const size_t l2 = s.l2_bytes > 0 ? static_cast<size_t>(s.l2_bytes) : 0;
  const int sets = static_cast<int>(std::max<size_t>(1, 2 * l2 / std::max<size_t>(set_bytes, 1) + 1));
  std::vector<std::unique_ptr<DeviceBuffer>> more;
  std::vector<std::vector<void*>> args{s.set0_args()};
  for (int i = 1; i < sets; ++i) args.push_back(s.allocate_set(more));

  cu::CUstream stream = nullptr;
  drv(d, d->cuStreamCreate(&stream, cu::CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  cu::CUgraph graph = nullptr;
  cu::CUgraphExec exec = nullptr;
  struct Cleanup {
    const cu::Driver* d;
    cu::CUstream& stream;
    cu::CUgraph& graph;
    cu::CUgraphExec& exec;
    ~Cleanup() {
      if (exec) d->cuGraphExecDestroy(exec);
      if (graph) d->cuGraphDestroy(graph);
      if (stream) d->cuStreamDestroy_v2(stream);
    }
  } cleanup{d, stream, graph, exec};
  drv(d, d->cuStreamBeginCapture_v2(stream, cu::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
  try {
    for (const std::vector<void*>& a : args) s.launch(stream, a);
  } catch (...) {
    d->cuStreamEndCapture(stream, &graph);
    throw;
  }
  drv(d, d->cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
  drv(d, d->cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiate");
  for (int i = 0; i < warmup; ++i) drv(d, d->cuGraphLaunch(exec, stream), "cuGraphLaunch");
  EventPair ev(d);
  std::vector<double> us;
  for (int i = 0; i < replays; ++i) {
    drv(d, d->cuEventRecord(ev.start, stream), "cuEventRecord");
    drv(d, d->cuGraphLaunch(exec, stream), "cuGraphLaunch");
    drv(d, d->cuEventRecord(ev.stop, stream), "cuEventRecord");
    us.push_back(ev.elapsed_us() / sets);
  }
  drv(d, d->cuStreamSynchronize(stream), "cuStreamSynchronize");
  return summarize(std::move(us), sets);
}

}  // namespace morgana::frontend
