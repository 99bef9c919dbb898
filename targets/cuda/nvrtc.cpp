#include "targets/cuda/nvrtc.h"

#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <sstream>

#include "ir/diagnostic.h"

namespace morgana::cuda {

namespace {

// The few NVRTC entry points we use, declared here so that no CUDA header is needed to build morgana. Their
// signatures are part of NVRTC's stable C ABI (nvrtc.h, CUDA 11 and later).
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;
constexpr nvrtcResult kSuccess = 0;
constexpr nvrtcResult kInvalidOption = 5;  // NVRTC_ERROR_INVALID_OPTION

struct Nvrtc {
  void* handle = nullptr;
  std::string path;
  std::string error;  // why loading failed
  const char* (*GetErrorString)(nvrtcResult) = nullptr;
  nvrtcResult (*Version)(int*, int*) = nullptr;
  nvrtcResult (*CreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                               const char* const*) = nullptr;
  nvrtcResult (*DestroyProgram)(nvrtcProgram*) = nullptr;
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*GetPTX)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*GetCUBIN)(nvrtcProgram, char*) = nullptr;
};

std::vector<std::string> candidate_paths() {
  std::vector<std::string> out;
  if (const char* p = std::getenv("MORGANA_NVRTC"); p && *p) out.emplace_back(p);
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* p = std::getenv(var); p && *p) out.push_back(std::string(p) + "/lib64/libnvrtc.so");
  out.emplace_back("/usr/local/cuda/lib64/libnvrtc.so");
  for (const char* soname : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"}) out.emplace_back(soname);
  return out;
}

template <class F>
bool bind(Nvrtc& n, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(n.handle, name));
  if (!fn) n.error = n.path + " has no symbol " + name;
  return fn != nullptr;
}

const Nvrtc& nvrtc() {
  static Nvrtc n;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    for (const std::string& p : candidate_paths()) {
      bool is_file = p.find('/') != std::string::npos;
      if (is_file && !std::filesystem::exists(p)) continue;
      if ((n.handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL))) {
        n.path = p;
        break;
      }
      const char* e = dlerror();
      tried += "\n  " + p + ": " + (e ? e : "not loadable");
    }
    if (!n.handle) {
      n.error = "NVRTC (the CUDA runtime compiler) was not found; install a CUDA toolkit >= 12, or set CUDA_HOME "
                "or MORGANA_NVRTC=/path/to/libnvrtc.so" +
                (tried.empty() ? std::string() : "; tried:" + tried);
      return;
    }
    bool ok = bind(n, n.GetErrorString, "nvrtcGetErrorString") && bind(n, n.Version, "nvrtcVersion") &&
              bind(n, n.CreateProgram, "nvrtcCreateProgram") && bind(n, n.DestroyProgram, "nvrtcDestroyProgram") &&
              bind(n, n.CompileProgram, "nvrtcCompileProgram") &&
              bind(n, n.GetProgramLogSize, "nvrtcGetProgramLogSize") &&
              bind(n, n.GetProgramLog, "nvrtcGetProgramLog") && bind(n, n.GetPTXSize, "nvrtcGetPTXSize") &&
              bind(n, n.GetPTX, "nvrtcGetPTX") && bind(n, n.GetCUBINSize, "nvrtcGetCUBINSize") &&
              bind(n, n.GetCUBIN, "nvrtcGetCUBIN");
    if (!ok) {
      dlclose(n.handle);
      n.handle = nullptr;
    }
  });
  return n;
}

// The NN of "<prefix>NN[a]" (90 for sm_90a), or 0 when `arch` is not of that form.
int number_with_prefix(std::string_view arch, std::string_view prefix) {
  if (arch.substr(0, prefix.size()) != prefix) return 0;
  std::string_view rest = arch.substr(prefix.size());
  size_t digits = 0;
  int number = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9' && digits < 6)
    number = number * 10 + (rest[digits++] - '0');
  if (digits < 2) return 0;
  rest.remove_prefix(digits);
  return rest.empty() || (rest.size() == 1 && rest[0] >= 'a' && rest[0] <= 'z') ? number : 0;
}

// NVRTC's log with every "file(LINE): ..." diagnostic followed by the generated line and where it came from.
std::string annotate_log(const NvrtcInput& in, const std::string& log) {
  std::vector<std::string_view> lines;
  for (size_t at = 0; at <= in.source.size();) {
    size_t end = in.source.find('\n', at);
    if (end == std::string_view::npos) end = in.source.size();
    lines.push_back(in.source.substr(at, end - at));
    at = end + 1;
  }
  std::ostringstream out;
  std::istringstream logs(log);
  std::string line;
  const std::string tag = std::string(in.file_name) + "(";
  while (std::getline(logs, line)) {
    out << "  " << line << "\n";
    if (line.rfind(tag, 0) != 0) continue;
    size_t close = line.find(')', tag.size());
    if (close == std::string::npos) continue;
    long n = std::strtol(line.c_str() + tag.size(), nullptr, 10);
    if (n < 1 || static_cast<size_t>(n) > lines.size()) continue;
    auto i = static_cast<size_t>(n - 1);
    out << "    generated line " << n << ": " << lines[i] << "\n";
    if (i < in.line_origin.size() && !in.line_origin[i].empty())
      out << "    from μGraph " << in.line_origin[i] << "\n";
  }
  return out.str();
}

}  // namespace

std::vector<KernelResources> ptxas_resources(std::string_view log) {
  // ptxas -v writes, per kernel: "Compiling entry function 'NAME' for 'sm_90a'", then "N bytes stack frame, S bytes
  // spill stores, L bytes spill loads" and "Used R registers, ...".
  std::vector<KernelResources> out;
  auto number_before = [](std::string_view line, std::string_view what) -> int64_t {
    const size_t at = line.find(what);
    if (at == std::string_view::npos) return -1;
    size_t b = at;
    while (b > 0 && line[b - 1] == ' ') --b;
    size_t e = b;
    while (b > 0 && std::isdigit(static_cast<unsigned char>(line[b - 1]))) --b;
    return b < e ? std::stoll(std::string(line.substr(b, e - b))) : -1;
  };
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    if (end == std::string_view::npos) end = log.size();
    const std::string_view line = log.substr(start, end - start);
    start = end + 1;
    constexpr std::string_view kEntry = "Compiling entry function '";
    if (size_t at = line.find(kEntry); at != std::string_view::npos) {
      const size_t name = at + kEntry.size();
      out.push_back({std::string(line.substr(name, line.find('\'', name) - name))});
      continue;
    }
    if (out.empty()) continue;
    if (int64_t v = number_before(line, "bytes spill stores"); v >= 0) out.back().spill_store_bytes = v;
    if (int64_t v = number_before(line, "bytes spill loads"); v >= 0) out.back().spill_load_bytes = v;
    if (line.find("Used ") != std::string_view::npos)
      if (int64_t v = number_before(line, "registers"); v >= 0) out.back().registers = static_cast<int>(v);
  }
  return out;
}

bool is_cubin_arch(std::string_view arch) { return number_with_prefix(arch, "sm_") != 0; }
bool is_ptx_arch(std::string_view arch) { return number_with_prefix(arch, "compute_") != 0; }
int cuda_arch_number(std::string_view arch) {
  int sm = number_with_prefix(arch, "sm_");
  return sm ? sm : number_with_prefix(arch, "compute_");
}

std::string nvrtc_version(std::string* why) {
  const Nvrtc& n = nvrtc();
  int major = 0, minor = 0;
  if (!n.handle || n.Version(&major, &minor) != kSuccess) {
    if (why) *why = n.handle ? "nvrtcVersion failed" : n.error;
    return "";
  }
  return std::to_string(major) + "." + std::to_string(minor);
}

NvrtcOutput nvrtc_compile(const NvrtcInput& in) {
  const Nvrtc& n = nvrtc();
  if (!n.handle) throw UserError(n.error);
  bool cubin = is_cubin_arch(in.arch);
  if (!cubin && !is_ptx_arch(in.arch))
    throw UserError("'" + in.arch + "' is not a CUDA architecture (expected sm_NN[a] or compute_NN[a])");

  std::vector<std::string> names, texts;
  for (const SourceHeader& h : in.headers) {
    names.emplace_back(h.name);
    texts.emplace_back(h.text);
  }
  std::vector<const char*> name_ptrs, text_ptrs;
  for (size_t i = 0; i < names.size(); ++i) {
    name_ptrs.push_back(names[i].c_str());
    text_ptrs.push_back(texts[i].c_str());
  }
  std::string source(in.source), file(in.file_name);
  nvrtcProgram prog = nullptr;
  if (nvrtcResult r = n.CreateProgram(&prog, source.c_str(), file.c_str(), static_cast<int>(names.size()),
                                      text_ptrs.data(), name_ptrs.data());
      r != kSuccess)
    throw UserError(std::string("NVRTC could not create a program: ") + n.GetErrorString(r));
  struct Destroy {
    const Nvrtc& n;
    nvrtcProgram& p;
    ~Destroy() { n.DestroyProgram(&p); }
  } destroy{n, prog};

  // -arch=sm_90a makes SASS (nvrtcGetCUBIN); -arch=compute_80 makes PTX only. Line info keeps profiler and
  // sanitizer reports readable; fast-math is off: the CPU reference defines the results.
  std::vector<std::string> opts = {"-arch=" + in.arch, "-std=c++17", "-default-device", "-lineinfo",
                                   "-DMORGANA_NVRTC=1"};
  if (in.resource_report && cubin) opts.push_back("-Xptxas=-v");
  auto compile = [&] {
    std::vector<const char*> opt_ptrs;
    for (const std::string& o : opts) opt_ptrs.push_back(o.c_str());
    return n.CompileProgram(prog, static_cast<int>(opt_ptrs.size()), opt_ptrs.data());
  };
  nvrtcResult compiled = compile();
  if (compiled == kInvalidOption && opts.back() == "-Xptxas=-v") {  // an NVRTC without the option: no report
    opts.pop_back();
    compiled = compile();
  }

  size_t log_size = 0;
  std::string log;
  if (n.GetProgramLogSize(prog, &log_size) == kSuccess && log_size > 1) {
    log.resize(log_size);
    n.GetProgramLog(prog, log.data());
    log.resize(log_size - 1);  // the terminating NUL
  }
  if (compiled != kSuccess)
    throw UserError("NVRTC failed to compile the generated CUDA for " + in.arch + " (" + n.GetErrorString(compiled) +
                    "):\n" + annotate_log(in, log));

  NvrtcOutput out;
  out.log = log;
  size_t size = 0;
  if (cubin) {
    if (n.GetCUBINSize(prog, &size) != kSuccess || size == 0) throw UserError("NVRTC produced no cubin for " + in.arch);
    out.code.resize(size);
    n.GetCUBIN(prog, reinterpret_cast<char*>(out.code.data()));
  } else {
    if (n.GetPTXSize(prog, &size) != kSuccess || size == 0) throw UserError("NVRTC produced no PTX for " + in.arch);
    out.code.resize(size);  // includes the terminating NUL
    n.GetPTX(prog, reinterpret_cast<char*>(out.code.data()));
  }
  return out;
}

}  // namespace morgana::cuda
