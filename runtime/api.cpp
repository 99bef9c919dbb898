// The C API (morgana/runtime.h) over the loader: argument checks, the thread-local last error, and a wall
// that no C++ exception crosses (an allocation failure or a bug becomes a status, never a terminate()).
#include <cstring>
#include <new>
#include <string>

#include "bundle.h"
#include "cuda_driver.h"
#include "loader.h"
#include "morgana/runtime.h"

struct mg_bundle {
  explicit mg_bundle(morgana::bundle::Bundle model) : loader(std::move(model)) {}
  morgana::runtime::Loader loader;
};

namespace {

using morgana::runtime::Error;
using morgana::runtime::failure;

thread_local std::string last_error;

mg_status report(const Error& e) {
  if (!e.ok()) {
    try {
      last_error = e.message;
    } catch (...) {
      last_error.clear();  // out of memory for the message itself: the status still says what happened
    }
  }
  return e.status;
}

mg_status invalid(const char* what) {
  return report(failure(MG_ERROR_INVALID_ARGUMENT, what));
}

// Runs `body` (returning an Error) with every exception turned into a status.
template <typename F>
mg_status guarded(const char* function, F&& body) {
  try {
    return report(body());
  } catch (const std::bad_alloc&) {
    return report(failure(MG_ERROR_OUT_OF_MEMORY, std::string(function) + ": out of host memory"));
  } catch (const std::exception& e) {
    return report(failure(MG_ERROR_INTERNAL, std::string(function) + ": internal error: " + e.what()));
  } catch (...) {
    return report(failure(MG_ERROR_INTERNAL, std::string(function) + ": internal error"));
  }
}

Error open_model(morgana::bundle::Result r, mg_bundle** out) {
  if (!r.ok()) return failure(r.io_error ? MG_ERROR_IO : MG_ERROR_BAD_BUNDLE, r.error);
  if (Error e = morgana::runtime::Loader::check(*r.bundle); !e.ok()) return e;
  *out = new mg_bundle(std::move(*r.bundle));
  return {};
}

void copy_string(char* dst, size_t capacity, const std::string& src) {
  size_t n = std::min(src.size(), capacity - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = 0;
}

}  // namespace

extern "C" {

const char* mg_status_name(mg_status status_value) {
  // A C caller may pass any int (the API promises a name for every value): read as an int, not as the enum, whose
  // out-of-range values C++ does not define (UBSan's -fsanitize=enum flags the switch otherwise).
  int status = 0;
  static_assert(sizeof status == sizeof status_value);
  std::memcpy(&status, &status_value, sizeof status);
  switch (status) {
    case MG_OK:
      return "MG_OK";
    case MG_ERROR_INVALID_ARGUMENT:
      return "MG_ERROR_INVALID_ARGUMENT";
    case MG_ERROR_IO:
      return "MG_ERROR_IO";
    case MG_ERROR_BAD_BUNDLE:
      return "MG_ERROR_BAD_BUNDLE";
    case MG_ERROR_NO_DRIVER:
      return "MG_ERROR_NO_DRIVER";
    case MG_ERROR_NO_DEVICE:
      return "MG_ERROR_NO_DEVICE";
    case MG_ERROR_NO_CONTEXT:
      return "MG_ERROR_NO_CONTEXT";
    case MG_ERROR_NO_VARIANT:
      return "MG_ERROR_NO_VARIANT";
    case MG_ERROR_NOT_FOUND:
      return "MG_ERROR_NOT_FOUND";
    case MG_ERROR_RESOURCES:
      return "MG_ERROR_RESOURCES";
    case MG_ERROR_DRIVER:
      return "MG_ERROR_DRIVER";
    case MG_ERROR_LAUNCH:
      return "MG_ERROR_LAUNCH";
    case MG_ERROR_OUT_OF_MEMORY:
      return "MG_ERROR_OUT_OF_MEMORY";
    case MG_ERROR_INTERNAL:
      return "MG_ERROR_INTERNAL";
  }
  return "MG_STATUS_UNKNOWN";
}

const char* mg_last_error(void) {
  return last_error.c_str();
}

int mg_runtime_api_version(void) {
  return MG_RUNTIME_API_VERSION;
}

mg_status mg_bundle_open(const char* path, mg_bundle** out) {
  if (out == nullptr) return invalid("mg_bundle_open: out is NULL");
  *out = nullptr;
  if (path == nullptr) return invalid("mg_bundle_open: path is NULL");
  return guarded("mg_bundle_open", [&] { return open_model(morgana::bundle::read_bundle_file(path), out); });
}

mg_status mg_bundle_open_memory(const void* data, size_t size, mg_bundle** out) {
  if (out == nullptr) return invalid("mg_bundle_open_memory: out is NULL");
  *out = nullptr;
  if (data == nullptr && size > 0) return invalid("mg_bundle_open_memory: data is NULL");
  return guarded("mg_bundle_open_memory", [&] {
    auto bytes = std::span(static_cast<const uint8_t*>(data), data == nullptr ? 0 : size);
    return open_model(morgana::bundle::read_bundle(bytes), out);
  });
}

void mg_bundle_close(mg_bundle* bundle) {
  try {
    delete bundle;
  } catch (...) {
    // Nothing in the destructor throws on purpose; never let anything out of a void C function.
  }
}

size_t mg_bundle_program_count(const mg_bundle* bundle) {
  return bundle == nullptr ? 0 : bundle->loader.programs().size();
}

mg_status mg_bundle_program(const mg_bundle* bundle, size_t index, const mg_program** out) {
  if (out == nullptr) return invalid("mg_bundle_program: out is NULL");
  *out = nullptr;
  if (bundle == nullptr) return invalid("mg_bundle_program: bundle is NULL");
  const auto& programs = bundle->loader.programs();
  if (index >= programs.size())
    return guarded("mg_bundle_program", [&] {
      return failure(MG_ERROR_INVALID_ARGUMENT, "mg_bundle_program: index " + std::to_string(index) +
                                                    " is out of range (the bundle has " +
                                                    std::to_string(programs.size()) + " programs)");
    });
  *out = &programs[index];
  return MG_OK;
}

mg_status mg_program_describe(const mg_program* program, mg_program_info* out) {
  if (program == nullptr || out == nullptr) return invalid("mg_program_describe: program or out is NULL");
  *out = program->info;
  return MG_OK;
}

mg_status mg_program_param(const mg_program* program, size_t index, mg_param_info* out) {
  if (program == nullptr || out == nullptr) return invalid("mg_program_param: program or out is NULL");
  if (index >= program->params.size())
    return guarded("mg_program_param", [&] {
      return failure(MG_ERROR_INVALID_ARGUMENT, "mg_program_param: index " + std::to_string(index) +
                                                    " is out of range (program '" + program->info.name +
                                                    "' has " + std::to_string(program->params.size()) +
                                                    " parameters)");
    });
  *out = program->params[index];
  return MG_OK;
}

mg_status mg_program_variant(const mg_program* program, size_t index, mg_variant_info* out) {
  if (program == nullptr || out == nullptr) return invalid("mg_program_variant: program or out is NULL");
  if (index >= program->variants.size())
    return guarded("mg_program_variant", [&] {
      return failure(MG_ERROR_INVALID_ARGUMENT, "mg_program_variant: index " + std::to_string(index) +
                                                    " is out of range (program '" + program->info.name +
                                                    "' has " + std::to_string(program->variants.size()) +
                                                    " variants)");
    });
  *out = program->variants[index];
  return MG_OK;
}

mg_status mg_bundle_select_program(mg_bundle* bundle, const char* name, const mg_program** out) {
  if (out == nullptr) return invalid("mg_bundle_select_program: out is NULL");
  *out = nullptr;
  if (bundle == nullptr || name == nullptr)
    return invalid("mg_bundle_select_program: bundle or name is NULL");
  return guarded("mg_bundle_select_program", [&] { return bundle->loader.select(name, out); });
}

mg_status mg_program_prepare(const mg_program* program, size_t* variant) {
  if (program == nullptr) return invalid("mg_program_prepare: program is NULL");
  return guarded("mg_program_prepare", [&] { return program->loader->prepare(*program, variant); });
}

mg_status mg_program_launch(const mg_program* program, void* stream, void* const* args, size_t nargs,
                            void* workspace) {
  if (program == nullptr) return invalid("mg_program_launch: program is NULL");
  return guarded("mg_program_launch",
                 [&] { return program->loader->launch(*program, stream, args, nargs, workspace); });
}

mg_status mg_bundle_launch(mg_bundle* bundle, const char* name, void* stream, void* const* args, size_t nargs,
                           void* workspace) {
  if (bundle == nullptr || name == nullptr) return invalid("mg_bundle_launch: bundle or name is NULL");
  return guarded("mg_bundle_launch", [&] {
    const mg_program* program = nullptr;
    if (Error e = bundle->loader.select(name, &program); !e.ok()) return e;
    return bundle->loader.launch(*program, stream, args, nargs, workspace);
  });
}

mg_status mg_device_count(int* count) {
  if (count == nullptr) return invalid("mg_device_count: count is NULL");
  *count = 0;
  return guarded("mg_device_count", [&] {
    Error e;
    const auto* d = morgana::runtime::cuda::load_driver(&e);
    if (d == nullptr) return e;
    if (auto r = d->cuDeviceGetCount(count); r != morgana::runtime::cuda::CUDA_SUCCESS)
      return d->error(MG_ERROR_DRIVER, r, "cuDeviceGetCount");
    return Error{};
  });
}

mg_status mg_device_describe(int ordinal, mg_device_info* out) {
  if (out == nullptr) return invalid("mg_device_describe: out is NULL");
  if (ordinal < -1) return invalid("mg_device_describe: ordinal is below -1");
  return guarded("mg_device_describe", [&] {
    namespace cuda = morgana::runtime::cuda;
    Error e;
    const cuda::Driver* d = cuda::load_driver(&e);
    if (d == nullptr) return e;
    cuda::CUdevice device = 0;
    if (ordinal == -1) {
      cuda::CurrentContext current;
      if (e = cuda::current_context(*d, &current); !e.ok()) return e;
      device = current.device;
    } else {
      int count = 0;
      if (auto r = d->cuDeviceGetCount(&count); r != cuda::CUDA_SUCCESS)
        return d->error(MG_ERROR_DRIVER, r, "cuDeviceGetCount");
      if (ordinal >= count)
        return failure(MG_ERROR_NO_DEVICE, "no GPU " + std::to_string(ordinal) + " (the driver sees " +
                                               std::to_string(count) + ")");
      if (auto r = d->cuDeviceGet(&device, ordinal); r != cuda::CUDA_SUCCESS)
        return d->error(MG_ERROR_DRIVER, r, "cuDeviceGet");
    }
    cuda::Device dev;
    if (e = cuda::describe_device(*d, device, &dev); !e.ok()) return e;
    mg_device_info info{};
    info.vendor = MG_VENDOR_NVIDIA;
    info.ordinal = dev.ordinal;
    copy_string(info.name, sizeof info.name, dev.name);
    copy_string(info.arch, sizeof info.arch,
                "sm_" + std::to_string(dev.cc_major) + std::to_string(dev.cc_minor));
    info.cc_major = dev.cc_major;
    info.cc_minor = dev.cc_minor;
    info.sm_count = dev.sm_count;
    info.max_threads_per_block = dev.max_threads_per_block;
    info.smem_per_block = dev.smem_per_block;
    info.smem_per_block_optin = dev.smem_per_block_optin;
    info.driver_version = d->version;
    *out = info;
    return Error{};
  });
}

}  // extern "C"
