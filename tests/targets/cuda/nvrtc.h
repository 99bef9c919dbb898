// A test-local NVRTC: dlopen of libnvrtc.so from $CUDA_HOME/lib64 or /usr/local/cuda/lib64 and a one-call compile
// of generated source with its embedded headers. (The compiler's real toolchain lives with `morgana compile`.)
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "targets/lower/emit.h"

namespace morgana::testing {

class Nvrtc {
 public:
  Nvrtc() {
    std::vector<std::string> dirs;
    if (const char* home = std::getenv("CUDA_HOME")) dirs.push_back(std::string(home) + "/lib64");
    dirs.push_back("/usr/local/cuda/lib64");
    for (const std::string& d : dirs)
      if ((lib_ = dlopen((d + "/libnvrtc.so").c_str(), RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib_) return;
    create_ = reinterpret_cast<Create>(dlsym(lib_, "nvrtcCreateProgram"));
    compile_ = reinterpret_cast<Compile>(dlsym(lib_, "nvrtcCompileProgram"));
    log_size_ = reinterpret_cast<Size>(dlsym(lib_, "nvrtcGetProgramLogSize"));
    log_ = reinterpret_cast<Get>(dlsym(lib_, "nvrtcGetProgramLog"));
    cubin_size_ = reinterpret_cast<Size>(dlsym(lib_, "nvrtcGetCUBINSize"));
    destroy_ = reinterpret_cast<Destroy>(dlsym(lib_, "nvrtcDestroyProgram"));
    if (!create_ || !compile_ || !log_size_ || !log_ || !cubin_size_ || !destroy_) {
      dlclose(lib_);
      lib_ = nullptr;
    }
  }
  ~Nvrtc() {
    if (lib_) dlclose(lib_);
  }
  Nvrtc(const Nvrtc&) = delete;
  Nvrtc& operator=(const Nvrtc&) = delete;

  bool available() const { return lib_ != nullptr; }

  struct Result {
    bool ok = false;
    std::string log;
    size_t cubin_bytes = 0;
  };

  // Compiles `src` to a cubin for `arch` ("sm_90a").
  Result compile(const lower::GeneratedSource& src, const std::string& name, const std::string& arch) const {
    std::vector<std::string> texts, names;
    for (const lower::EmbeddedHeader& h : src.headers) {
      texts.emplace_back(h.text);
      names.emplace_back(h.name);
    }
    std::vector<const char*> tp, np;
    for (size_t i = 0; i < texts.size(); ++i) {
      tp.push_back(texts[i].c_str());
      np.push_back(names[i].c_str());
    }
    void* prog = nullptr;
    Result r;
    if (create_(&prog, src.text.c_str(), name.c_str(), static_cast<int>(tp.size()), tp.data(), np.data()) != 0) {
      r.log = "nvrtcCreateProgram failed";
      return r;
    }
    std::string arch_opt = "--gpu-architecture=" + arch;
    const char* opts[] = {arch_opt.c_str(), "--std=c++17"};
    int rc = compile_(prog, 2, opts);
    size_t n = 0;
    log_size_(prog, &n);
    r.log.assign(n, '\0');
    if (n) log_(prog, r.log.data());
    while (!r.log.empty() && (r.log.back() == '\0' || r.log.back() == '\n')) r.log.pop_back();
    r.ok = rc == 0;
    if (r.ok) cubin_size_(prog, &r.cubin_bytes);
    destroy_(&prog);
    return r;
  }

 private:
  using Create = int (*)(void**, const char*, const char*, int, const char* const*, const char* const*);
  using Compile = int (*)(void*, int, const char* const*);
  using Size = int (*)(void*, size_t*);
  using Get = int (*)(void*, char*);
  using Destroy = int (*)(void**);
  void* lib_ = nullptr;
  Create create_ = nullptr;
  Compile compile_ = nullptr;
  Size log_size_ = nullptr, cubin_size_ = nullptr;
  Get log_ = nullptr;
  Destroy destroy_ = nullptr;
};

}  // namespace morgana::testing
