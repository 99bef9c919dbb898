// Fuzz target: a bundle file (docs/bundle-format.md), as the runtime opens it for a user (mg_bundle_open_memory,
// then every introspection call of the C API) and as `morgana inspect` reads it (bundle::read_bundle). A bundle the
// reader accepts must satisfy the content rules, and write back to bytes that read back as the same bundle.
//
// Checksums cover almost every byte, so most mutations would stop at the first CRC. The first input byte picks how
// the rest is read: even, as it is; odd, with every section-table checksum recomputed first ("resealed", as an
// attacker who edits a file would), so that the manifest decoder and the content rules see the mutations.
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/bundle.h"
#include "runtime/include/morgana/runtime.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/runtime/samples.h"

using namespace morgana;

namespace {

void introspect(mg_bundle* b) {
  const size_t n = mg_bundle_program_count(b);
  for (size_t p = 0; p < n; ++p) {
    const mg_program* prog = nullptr;
    if (mg_bundle_program(b, p, &prog) != MG_OK) fuzz::finding("a listed program cannot be fetched");
    mg_program_info info;
    if (mg_program_describe(prog, &info) != MG_OK) fuzz::finding("a program cannot be described");
    (void)std::strlen(info.name);
    (void)std::strlen(info.mugraph);
    for (size_t i = 0; i < info.num_params; ++i) {
      mg_param_info param;
      if (mg_program_param(prog, i, &param) != MG_OK) fuzz::finding("a counted parameter cannot be read");
      if (param.rank > MG_MAX_RANK) fuzz::finding("a parameter's rank exceeds MG_MAX_RANK");
    }
    for (size_t i = 0; i < info.num_variants; ++i) {
      mg_variant_info variant;
      if (mg_program_variant(prog, i, &variant) != MG_OK) fuzz::finding("a counted variant cannot be read");
      (void)std::strlen(variant.target);
      (void)std::strlen(variant.arch);
    }
    const mg_program* by_name = nullptr;
    if (mg_bundle_select_program(b, info.name, &by_name) == MG_OK && by_name == nullptr)
      fuzz::finding("a program selected by its name is null");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  bundle::samples::Bytes file(data + 1, data + size);
  if (data[0] & 1) bundle::samples::reseal(file);
  // An exact-size heap copy: AddressSanitizer then sees a read one byte past the end.
  std::unique_ptr<uint8_t[]> exact(new uint8_t[file.size()]);
  if (!file.empty()) std::memcpy(exact.get(), file.data(), file.size());
  const std::span<const uint8_t> bytes(exact.get(), file.size());

  bundle::Result r = bundle::read_bundle(bytes);
  if (r.ok()) {
    if (std::optional<std::string> broken = bundle::validate(*r.bundle))
      fuzz::finding("the reader accepted a bundle that breaks a content rule: " + *broken);
    for (size_t i = 0; i < r.bundle->variants.size(); ++i) (void)bundle::describe_variant(*r.bundle, i);
    bundle::Result again = bundle::read_bundle(bundle::write_bundle(*r.bundle));
    if (!again.ok() || *again.bundle != *r.bundle) fuzz::finding("an accepted bundle does not survive a rewrite");
  } else if (r.error.empty() || r.error.find('\n') != std::string::npos) {
    fuzz::finding("a refusal is not one line: '" + r.error + "'");
  }

  mg_bundle* b = nullptr;
  const mg_status s = mg_bundle_open_memory(bytes.data(), bytes.size(), &b);
  if (s == MG_OK) {
    if (!r.ok()) fuzz::finding("the runtime opened a bundle the reader refuses: " + r.error);
    introspect(b);
    mg_bundle_close(b);
  } else if (b != nullptr) {
    fuzz::finding("a failed open left a bundle behind");
  }
  return 0;
}
