#include "frontend/run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

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

// A failed runtime call: the user's problem (no driver, no GPU, wrong bundle), so a UserError with its message.
void check(mg_status s, const char* what) {
  if (s != MG_OK) throw UserError(std::string(what) + ": " + mg_last_error() + " [" + mg_status_name(s) + "]");
}

void check(const runtime::Error& e) {
  if (!e.ok()) throw UserError(e.message);
}

ir::DType ir_dtype(mg_dtype t) {
  switch (t) {
    case MG_DTYPE_F16: return ir::DType::f16;
    case MG_DTYPE_BF16: return ir::DType::bf16;
    default: return ir::DType::f32;
  }
}

struct BundleHandle {
  mg_bundle* b = nullptr;
  ~BundleHandle() { mg_bundle_close(b); }
};

// Device memory that frees itself (the context outlives it: it is the process's primary context).
struct DeviceBuffer {
  const cu::Driver* d = nullptr;
  cu::CUdeviceptr ptr = 0;
  size_t bytes = 0;
  DeviceBuffer(const cu::Driver* driver, size_t n) : d(driver), bytes(std::max<size_t>(n, 1)) {
    if (cu::CUresult r = d->cuMemAlloc_v2(&ptr, bytes); r != cu::CUDA_SUCCESS)
      check(d->error(MG_ERROR_DRIVER, r, "cuMemAlloc(" + std::to_string(bytes) + " bytes)"));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr) d->cuMemFree_v2(ptr);
  }
};

void drv(const cu::Driver* d, cu::CUresult r, const char* what) {
  if (r != cu::CUDA_SUCCESS) check(d->error(MG_ERROR_DRIVER, r, what));
}

// The program name to run: the one given, or the bundle's only one.
std::string pick_name(mg_bundle* b, const std::string& wanted) {
  std::set<std::string> names;
  for (size_t i = 0; i < mg_bundle_program_count(b); ++i) {
    const mg_program* p = nullptr;
    mg_program_info info{};
    check(mg_bundle_program(b, i, &p), "reading the bundle");
    check(mg_program_describe(p, &info), "reading the bundle");
    names.insert(info.name);
  }
  std::string all;
  for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
  if (!wanted.empty()) {
    if (!names.count(wanted)) throw UserError("the bundle has no program '" + wanted + "' (it has: " + all + ")");
    return wanted;
  }
  if (names.size() != 1) {
    throw UserError("the bundle has " + std::to_string(names.size()) + " programs (" + all +
                    "); choose one with --program NAME");
  }
  return *names.begin();
}

}  // namespace

RunResult run_bundle(const RunOptions& o) {
  RunResult res;
  auto line = [&](const std::string& s) { res.report += s + "\n"; };

  BundleHandle bundle;
  check(mg_bundle_open(o.bundle_path.c_str(), &bundle.b), "opening the bundle");
  std::string name = pick_name(bundle.b, o.program);

  runtime::Error err;
  const cu::Driver* d = cu::load_driver(&err);
  if (!d) check(err);
  cu::CUcontext ctx = nullptr;
  check(cu::use_primary_context(*d, o.device, &ctx));

  mg_device_info dev{};
  check(mg_device_describe(-1, &dev), "reading the device");
  line(fmt("device %d: %s (%s, %d SMs), driver %d.%d", dev.ordinal, dev.name, dev.arch, dev.sm_count,
           dev.driver_version / 1000, dev.driver_version % 1000 / 10));

  const mg_program* prog = nullptr;
  check(mg_bundle_select_program(bundle.b, name.c_str(), &prog), "choosing the code");
  size_t variant = 0;
  check(mg_program_prepare(prog, &variant), "loading the code");
  mg_program_info info{};
  mg_variant_info vinfo{};
  check(mg_program_describe(prog, &info), "reading the program");
  check(mg_program_variant(prog, variant, &vinfo), "reading the program");
  line(fmt("program %s: %zu kernel(s), workspace %llu bytes; running %s %s (compiled for %s)", info.name,
           info.num_kernels, static_cast<unsigned long long>(info.workspace_bytes),
           vinfo.kind == MG_VARIANT_PTX ? "PTX" : "cubin", vinfo.arch, vinfo.target));

  // The reference: the program's μGraph in the CPU interpreter, on the same seeded inputs.
  ir::Module m = ir::parse_module(info.mugraph, std::string(info.name) + " (from the bundle)");
  MG_CHECK(m.programs.size() == 1, "a bundle program holds one μGraph");
  const ir::Graph& g = m.programs[0];
  MG_CHECK(g.inputs().size() == info.num_inputs && g.outputs().size() == info.num_outputs,
           "the bundle's μGraph does not match its parameters");
  std::vector<verify::FloatArray> inputs = verify::random_inputs(g, o.seed);

  // Device buffers: inputs uploaded, outputs and workspace poisoned with 0xFF bytes (NaN in every float type), so
  // an element no kernel writes shows up as a mismatch.
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  std::vector<void*> args;
  std::vector<mg_param_info> params(info.num_inputs + info.num_outputs);
  for (size_t i = 0; i < params.size(); ++i) {
    check(mg_program_param(prog, i, &params[i]), "reading the program");
    buffers.push_back(std::make_unique<DeviceBuffer>(d, params[i].span_bytes));
    args.push_back(reinterpret_cast<void*>(buffers.back()->ptr));
    if (i < info.num_inputs) {
      ir::DType t = ir_dtype(params[i].dtype);
      MG_CHECK(t == g.type(g.inputs()[i]).dtype, "input type differs from the μGraph's");
      std::vector<uint8_t> host(params[i].span_bytes);
      size_t width = static_cast<size_t>(ir::dtype_bytes(t));
      for (size_t k = 0; k < inputs[i].data.size(); ++k) ir::encode_element(inputs[i].data[k], t, &host[k * width]);
      drv(d, d->cuMemcpyHtoD_v2(buffers.back()->ptr, host.data(), host.size()), "cuMemcpyHtoD");
    } else {
      drv(d, d->cuMemsetD8_v2(buffers.back()->ptr, 0xff, buffers.back()->bytes), "cuMemsetD8");
    }
  }
  std::unique_ptr<DeviceBuffer> workspace;
  if (info.workspace_bytes) {
    workspace = std::make_unique<DeviceBuffer>(d, info.workspace_bytes);
    drv(d, d->cuMemsetD8_v2(workspace->ptr, 0xff, workspace->bytes), "cuMemsetD8");
  }
  void* ws = workspace ? reinterpret_cast<void*>(workspace->ptr) : nullptr;

  check(mg_program_launch(prog, nullptr, args.data(), args.size(), ws), "launching");
  drv(d, d->cuCtxSynchronize(), "running the kernels (cuCtxSynchronize)");

  if (o.check) {
    // Two references: `device` precision (f32 arithmetic, every kernel-level tensor rounded to its type as the
    // GPU stores it) decides pass or fail, since it computes what the program computes; f64 shows how far that
    // is from exact arithmetic (intermediates stored in f16/bf16 cost accuracy the compiler cannot recover).
    std::vector<verify::FloatArray> want = verify::eval_float(g, inputs, verify::Precision::device);
    std::vector<verify::FloatArray> exact = verify::eval_float(g, inputs, verify::Precision::f64);
    for (size_t out = 0; out < info.num_outputs; ++out) {
      const mg_param_info& p = params[info.num_inputs + out];
      ir::DType t = ir_dtype(p.dtype);
      std::vector<uint8_t> host(p.span_bytes);
      drv(d, d->cuMemcpyDtoH_v2(host.data(), buffers[info.num_inputs + out]->ptr, host.size()), "cuMemcpyDtoH");
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
      ir::TensorId ot = g.outputs()[out];
      double got = r.data.empty() ? 0 : ir::decode_element(&host[worst_at * width], t);
      line(fmt("output %zu %s %s: %s  max |gpu - cpu| %.3g (vs f64: %.3g), worst %s: gpu %.6g, cpu %.6g (%.2f of the "
               "tolerance)%s",
               out, p.name, g.type(ot).str().c_str(), ok ? "ok" : "MISMATCH", max_abs, max_abs_exact,
               g.type(ot).index_str(static_cast<int64_t>(worst_at)).c_str(), got, r.data.empty() ? 0.0 : r.data[worst_at],
               worst, ok ? "" : fmt("; %zu of %zu elements outside", bad, r.data.size()).c_str()));
    }
    line(res.pass ? "check passed: every output matches the CPU reference (device precision) within its dtype's "
                    "tolerance"
                  : "check FAILED");
  }

  if (o.iterations > 0) {
    for (int i = 0; i < o.warmup; ++i)
      check(mg_program_launch(prog, nullptr, args.data(), args.size(), ws), "launching");
    cu::CUevent start = nullptr, stop = nullptr;
    drv(d, d->cuEventCreate(&start, 0), "cuEventCreate");
    drv(d, d->cuEventCreate(&stop, 0), "cuEventCreate");
    std::vector<double> us;
    for (int i = 0; i < o.iterations; ++i) {
      drv(d, d->cuEventRecord(start, nullptr), "cuEventRecord");
      check(mg_program_launch(prog, nullptr, args.data(), args.size(), ws), "launching");
      drv(d, d->cuEventRecord(stop, nullptr), "cuEventRecord");
      drv(d, d->cuEventSynchronize(stop), "cuEventSynchronize");
      float ms = 0;
      drv(d, d->cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
      us.push_back(ms * 1000.0);
    }
    d->cuEventDestroy_v2(start);
    d->cuEventDestroy_v2(stop);
    std::sort(us.begin(), us.end());
    line(fmt("time: median %.1f us, min %.1f us over %d launches (events around each launch, same inputs: L2-warm)",
             us[us.size() / 2], us.front(), o.iterations));
  }
  return res;
}

}  // namespace morgana::frontend
