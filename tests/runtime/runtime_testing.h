// Helpers for the tests of the runtime's C API: bundles built with the bundle writer whose code objects the
// fake driver (tests/runtime/fake_cuda/fake_cuda.c) understands, a handle that closes its bundle, and access
// to the fake driver's log and controls.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "morgana/runtime.h"
#include "runtime/bundle.h"

namespace morgana::runtime::testing {

using bundle::Bundle;
using bundle::DType;
using bundle::Kernel;
using bundle::Parameter;
using bundle::TensorMap;
using bundle::Program;
using bundle::Role;
using bundle::Variant;
using bundle::VariantKind;

inline Parameter f32(std::string name, Role role, int64_t n) {
  return Parameter{std::move(name), role, DType::f32, {n}, {1}};
}

// The fake's code object: "fake <arch>" and one line per function (see fake_cuda.c), NUL-terminated unless
// `terminated` is false (PTX as a compiler may write it, without the C string's NUL).
inline std::vector<uint8_t> fake_code(const std::string& arch, const std::string& functions,
                                      bool terminated = true) {
  std::string text = "fake " + arch + "\n" + functions;
  std::vector<uint8_t> bytes(text.begin(), text.end());
  if (terminated) bytes.push_back(0);
  return bytes;
}

inline Variant variant(std::string target, VariantKind kind, std::string arch, const std::string& functions,
                       bool terminated = true) {
  std::vector<uint8_t> code = fake_code(arch, functions, terminated);
  return Variant{std::move(target), kind, std::move(arch), std::move(code), 0};
}

// A one-kernel program `name` with inputs a, b and output c (f32[n]), kernel "<name>_k0" on a 4x1x1 grid of
// 256x1x1 blocks, using the variants given (indices into the bundle).
inline Program simple_program(const std::string& name, std::vector<uint32_t> variants, int64_t n = 1024,
                              uint32_t smem = 0) {
  Kernel k{name + "_k0",
           {4, 1, 1},
           {256, 1, 1},
           smem,
           {f32("a", Role::input, n), f32("b", Role::input, n), f32("c", Role::output, n)}};
  return Program{name, "kernel " + name + "\n", 0, {k}, std::move(variants)};
}

struct BundleCloser {
  void operator()(mg_bundle* b) const { mg_bundle_close(b); }
};
using BundlePtr = std::unique_ptr<mg_bundle, BundleCloser>;

// Opens `b` through mg_bundle_open_memory; fails the test when that fails.
inline BundlePtr open(const Bundle& b) {
  std::vector<uint8_t> bytes = bundle::write_bundle(b);
  mg_bundle* out = nullptr;
  mg_status s = mg_bundle_open_memory(bytes.data(), bytes.size(), &out);
  EXPECT_EQ(s, MG_OK) << mg_last_error();
  return BundlePtr(out);
}

inline const mg_program* program_at(const mg_bundle* b, size_t index) {
  const mg_program* p = nullptr;
  EXPECT_EQ(mg_bundle_program(b, index, &p), MG_OK) << mg_last_error();
  return p;
}

// The fake driver as the tests see it: the same library the runtime dlopened (dlopen returns the loaded one).
struct Fake {
  void* lib = nullptr;
  size_t (*log)(char*, size_t) = nullptr;
  void (*clear_log)() = nullptr;
  void (*set_attribute)(int, int, int) = nullptr;
  int (*cuDevicePrimaryCtxRetain)(void**, int) = nullptr;
  int (*cuDevicePrimaryCtxRelease_v2)(int) = nullptr;
  int (*cuCtxSetCurrent)(void*) = nullptr;
  int (*cuCtxGetId)(void*, unsigned long long*) = nullptr;

  static Fake& get() {
    static Fake f = [] {
      Fake x;
      x.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
      if (x.lib == nullptr) return x;
      auto bind = [&](const char* name, auto& fn) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(x.lib, name));
      };
      bind("fake_cuda_log", x.log);
      bind("fake_cuda_clear_log", x.clear_log);
      bind("fake_cuda_set_attribute", x.set_attribute);
      bind("cuDevicePrimaryCtxRetain", x.cuDevicePrimaryCtxRetain);
      bind("cuDevicePrimaryCtxRelease_v2", x.cuDevicePrimaryCtxRelease_v2);
      bind("cuCtxSetCurrent", x.cuCtxSetCurrent);
      bind("cuCtxGetId", x.cuCtxGetId);
      return x;
    }();
    return f;
  }
  bool ok() const { return lib != nullptr && log != nullptr; }

  std::string text() const {
    std::string s(log(nullptr, 0) + 1, '\0');
    s.resize(log(s.data(), s.size()));
    return s;
  }
  // The log's lines that start with `prefix`.
  std::vector<std::string> lines(const std::string& prefix) const {
    std::vector<std::string> out;
    std::istringstream in(text());
    for (std::string line; std::getline(in, line);)
      if (line.compare(0, prefix.size(), prefix) == 0) out.push_back(line);
    return out;
  }
};

}  // namespace morgana::runtime::testing
