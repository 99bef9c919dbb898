// The loader behind the C API: an open bundle, its programs as the API shows them, and a cache of what each
// CUDA context has loaded. Code for a (program, context) is chosen and loaded on first use and kept until the
// bundle is closed; a context's modules are shared by the programs whose kernels they hold.
//
// Threads: any number may call select, prepare and launch at once. Loading is serialised by one mutex, and
// the cache is read under a shared lock, so a launch of code that is already loaded waits for nothing but a
// map lookup, not for another thread's load (a PTX variant takes tens of milliseconds to compile).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "bundle.h"
#include "cuda_driver.h"
#include "error.h"

namespace morgana::runtime {
class Loader;
}

// A program as the C API shows it: the bundle's record and the answers to the API's questions, built once.
struct mg_program {
  const morgana::runtime::Loader* loader = nullptr;
  size_t index = 0;  // in the bundle
  mg_program_info info{};
  std::vector<mg_param_info> params;
  std::vector<mg_variant_info> variants;
};

namespace morgana::runtime {

class Loader {
 public:
  // The bundle must satisfy check_parameter_contract for every program (see check()).
  explicit Loader(bundle::Bundle model);
  // Unloads, in every context that is still alive, the modules this bundle loaded. Must not race with any
  // other call on the same loader.
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The first program that breaks the parameter contract, as "program 0 (attention): ...".
  static Error check(const bundle::Bundle& model);

  const bundle::Bundle& model() const { return model_; }
  const std::vector<mg_program>& programs() const { return programs_; }

  // The program of that name whose best variant is the best for the current context's device.
  Error select(std::string_view name, const mg_program** out) const;
  // Chooses and loads the program's code for the current context; `variant` receives its index among the
  // program's variants.
  Error prepare(const mg_program& program, size_t* variant) const;
  Error launch(const mg_program& program, void* stream, void* const* args, size_t nargs,
               void* workspace) const;

 private:
  struct KernelLaunch {
    cuda::CUfunction function = nullptr;
    bundle::Dim3 grid, block;
    uint32_t dynamic_smem = 0;
  };
  // A program made ready in one context.
  struct Resolved {
    size_t variant = 0;  // index into the program's variant list
    std::vector<KernelLaunch> kernels;
  };
  // What one context has: its device, the modules loaded in it (by variant index in the bundle), the
  // programs resolved in it and the answers of select by name.
  struct ContextState {
    cuda::CUcontext context = nullptr;
    unsigned long long id = 0;
    cuda::Device device;
    std::map<size_t, cuda::CUmodule> modules;
    std::vector<std::unique_ptr<const Resolved>> programs;  // by program index; null until resolved
    std::map<std::string, size_t, std::less<>> by_name;
  };
  using Key = std::pair<cuda::CUcontext, unsigned long long>;

  Error check_arguments(const mg_program& program, void* const* args, size_t nargs, void* workspace) const;
  // The state of the current context, made (and its device read) on first use. load_mu_ must be held.
  Error state_for(const cuda::Driver& d, const cuda::CurrentContext& current, ContextState** out) const;
  // The program's resolved launch list in the current context, chosen and loaded on first use.
  Error resolved(const mg_program& program, const Resolved** out) const;
  Error resolve(const cuda::Driver& d, ContextState& state, size_t program,
                std::unique_ptr<Resolved>* out) const;
  Error load_module(const cuda::Driver& d, ContextState& state, size_t variant, cuda::CUmodule* out) const;
  Error prepare_kernel(const cuda::Driver& d, const ContextState& state, const bundle::Program& program,
                       size_t k, cuda::CUmodule module, KernelLaunch* out) const;

  bundle::Bundle model_;
  std::vector<mg_program> programs_;

  mutable std::mutex load_mu_;    // held while choosing and loading code; taken before mu_
  mutable std::shared_mutex mu_;  // guards contexts_ and what its states publish (programs, by_name)
  mutable std::map<Key, std::unique_ptr<ContextState>> contexts_;
};

}  // namespace morgana::runtime
