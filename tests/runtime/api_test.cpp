// The C API where no GPU is involved: opening bundles (from memory and from files), the parameter contract at
// open, introspection, argument checks, status names and the thread-local error; and, with no libcuda.so.1
// reachable (meson runs this with LD_LIBRARY_PATH at an empty folder), MG_ERROR_NO_DRIVER with its exact
// message from every call that needs the GPU while bundles still open and describe themselves.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/runtime/runtime_testing.h"

namespace morgana::runtime::testing {
namespace {

// A program with a workspace and two kernels, plus a second program sharing its variant.
Bundle two_programs() {
  Bundle b;
  b.variants.push_back(
      variant("h200", VariantKind::cubin, "sm_90a", "func attn_k0 params=4\nfunc attn_k1 params=4\n"));
  b.variants.push_back(
      variant("a100", VariantKind::ptx, "compute_80", "func attn_k0 params=4\nfunc attn_k1 params=4\n"));
  std::vector<Parameter> params = {
      Parameter{"q", Role::input, DType::f16, {2, 8, 128}, {1024, 128, 1}},
      Parameter{"k", Role::input, DType::bf16, {2, 4096, 128}, {524288, 128, 1}},
      Parameter{"o", Role::output, DType::f16, {2, 8, 128}, {1024, 128, 1}},
      Parameter{"ws", Role::workspace, DType::f32, {2, 8, 33}, {264, 33, 1}},
  };
  Kernel k0{"attn_k0", {16, 2, 1}, {128, 1, 1}, 65536, params};
  Kernel k1{"attn_k1", {2, 1, 1}, {256, 1, 1}, 0, params};
  b.programs.push_back(Program{"attn", "μ-graph text\n", 2 * 8 * 33 * 4, {k0, k1}, {0, 1}});
  b.programs.push_back(simple_program("add", {0}));
  return b;
}

TEST(Api, StatusNames) {
  EXPECT_STREQ(mg_status_name(MG_OK), "MG_OK");
  EXPECT_STREQ(mg_status_name(MG_ERROR_NO_DRIVER), "MG_ERROR_NO_DRIVER");
  EXPECT_STREQ(mg_status_name(MG_ERROR_INTERNAL), "MG_ERROR_INTERNAL");
  EXPECT_STREQ(mg_status_name(static_cast<mg_status>(99)), "MG_STATUS_UNKNOWN");
  for (int s = 0; s <= MG_ERROR_INTERNAL; ++s)
    EXPECT_STRNE(mg_status_name(static_cast<mg_status>(s)), "MG_STATUS_UNKNOWN") << s;
  EXPECT_EQ(mg_runtime_api_version(), MG_RUNTIME_API_VERSION);
}

TEST(Api, DescribesProgramsParametersAndVariants) {
  BundlePtr b = open(two_programs());
  ASSERT_TRUE(b);
  ASSERT_EQ(mg_bundle_program_count(b.get()), 2u);
  const mg_program* attn = program_at(b.get(), 0);
  mg_program_info info{};
  ASSERT_EQ(mg_program_describe(attn, &info), MG_OK);
  EXPECT_STREQ(info.name, "attn");
  EXPECT_STREQ(info.mugraph, "μ-graph text\n");
  EXPECT_EQ(info.num_inputs, 2u);
  EXPECT_EQ(info.num_outputs, 1u);
  EXPECT_EQ(info.num_params, 4u);
  EXPECT_EQ(info.workspace_bytes, 2u * 8 * 33 * 4);
  EXPECT_EQ(info.num_kernels, 2u);
  EXPECT_EQ(info.num_variants, 2u);

  mg_param_info k{};
  ASSERT_EQ(mg_program_param(attn, 1, &k), MG_OK);
  EXPECT_STREQ(k.name, "k");
  EXPECT_EQ(k.role, MG_ROLE_INPUT);
  EXPECT_EQ(k.dtype, MG_DTYPE_BF16);
  ASSERT_EQ(k.rank, 3u);
  EXPECT_EQ(k.shape[0], 2);
  EXPECT_EQ(k.shape[2], 128);
  EXPECT_EQ(k.strides[0], 524288);
  EXPECT_EQ(k.span_bytes, 2u * 4096 * 128 * 2);
  mg_param_info ws{};
  ASSERT_EQ(mg_program_param(attn, 3, &ws), MG_OK);
  EXPECT_EQ(ws.role, MG_ROLE_WORKSPACE);
  EXPECT_EQ(ws.dtype, MG_DTYPE_F32);
  EXPECT_EQ(mg_program_param(attn, 4, &ws), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mg_last_error(),
               "mg_program_param: index 4 is out of range (program 'attn' has 4 parameters)");

  mg_variant_info v{};
  ASSERT_EQ(mg_program_variant(attn, 1, &v), MG_OK);
  EXPECT_STREQ(v.target, "a100");
  EXPECT_EQ(v.kind, MG_VARIANT_PTX);
  EXPECT_STREQ(v.arch, "compute_80");
  EXPECT_EQ(v.payload_bytes,
            fake_code("compute_80", "func attn_k0 params=4\nfunc attn_k1 params=4\n").size());
  EXPECT_EQ(mg_program_variant(attn, 2, &v), MG_ERROR_INVALID_ARGUMENT);

  const mg_program* none = attn;
  EXPECT_EQ(mg_bundle_program(b.get(), 2, &none), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(none, nullptr);
  EXPECT_STREQ(mg_last_error(), "mg_bundle_program: index 2 is out of range (the bundle has 2 programs)");
}

TEST(Api, ZeroSizedTensorsHaveNoSpan) {
  Bundle b = two_programs();
  b.programs[1].kernels[0].params[0].shape = {0};
  BundlePtr open_b = open(b);
  mg_param_info a{};
  ASSERT_EQ(mg_program_param(program_at(open_b.get(), 1), 0, &a), MG_OK);
  EXPECT_EQ(a.span_bytes, 0u);
}

TEST(Api, RefusesABundleBreakingTheParameterContract) {
  Bundle b = two_programs();
  b.programs[0].kernels[1].params.erase(b.programs[0].kernels[1].params.begin());
  std::vector<uint8_t> bytes = bundle::write_bundle(b);
  mg_bundle* out = reinterpret_cast<mg_bundle*>(1);
  EXPECT_EQ(mg_bundle_open_memory(bytes.data(), bytes.size(), &out), MG_ERROR_BAD_BUNDLE);
  EXPECT_EQ(out, nullptr);
  EXPECT_STREQ(
      mg_last_error(),
      "program 0 (attn): kernel 1 (attn_k1) has 3 parameters, kernel 0 (attn_k0) has 4 (every kernel of a "
      "program takes the program's parameters, in the same order)");
}

TEST(Api, OpenMemoryReportsTheReadersMessage) {
  std::vector<uint8_t> bytes = bundle::write_bundle(two_programs());
  mg_bundle* out = nullptr;
  EXPECT_EQ(mg_bundle_open_memory(bytes.data(), 20, &out), MG_ERROR_BAD_BUNDLE);
  EXPECT_STREQ(mg_last_error(), "truncated: header needs 32 bytes at offset 0, file has 20");
  EXPECT_EQ(mg_bundle_open_memory(nullptr, 0, &out), MG_ERROR_BAD_BUNDLE);
  EXPECT_EQ(mg_bundle_open_memory(nullptr, 5, &out), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mg_last_error(), "mg_bundle_open_memory: data is NULL");
  EXPECT_EQ(mg_bundle_open_memory(bytes.data(), bytes.size(), nullptr), MG_ERROR_INVALID_ARGUMENT);
}

TEST(Api, OpenFileIoAndFormatErrors) {
  const auto dir = std::filesystem::temp_directory_path() / ("morgana_api_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "good.mgb").string(), bad = (dir / "bad.mgb").string();
  ASSERT_TRUE(bundle::write_bundle_file(good, two_programs()).ok());
  { std::ofstream(bad, std::ios::binary) << "not a bundle at all, not even close"; }
  mg_bundle* b = nullptr;
  ASSERT_EQ(mg_bundle_open(good.c_str(), &b), MG_OK) << mg_last_error();
  EXPECT_EQ(mg_bundle_program_count(b), 2u);
  mg_bundle_close(b);

  EXPECT_EQ(mg_bundle_open(bad.c_str(), &b), MG_ERROR_BAD_BUNDLE);
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(std::string(mg_last_error()),
            bad + ": not a morgana bundle (the file does not start with the bundle magic bytes)");
  const std::string missing = (dir / "missing.mgb").string();
  EXPECT_EQ(mg_bundle_open(missing.c_str(), &b), MG_ERROR_IO);
  EXPECT_EQ(std::string(mg_last_error()), missing + ": cannot open: No such file or directory");
  EXPECT_EQ(mg_bundle_open(dir.c_str(), &b), MG_ERROR_IO);
  EXPECT_EQ(mg_bundle_open(nullptr, &b), MG_ERROR_INVALID_ARGUMENT);
  std::filesystem::remove_all(dir);
}

TEST(Api, NullArgumentsAreErrorsNotCrashes) {
  mg_bundle_close(nullptr);
  EXPECT_EQ(mg_bundle_program_count(nullptr), 0u);
  const mg_program* p = nullptr;
  EXPECT_EQ(mg_bundle_program(nullptr, 0, &p), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mg_bundle_select_program(nullptr, "attn", &p), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mg_program_describe(nullptr, nullptr), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mg_program_prepare(nullptr, nullptr), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mg_program_launch(nullptr, nullptr, nullptr, 0, nullptr), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mg_last_error(), "mg_program_launch: program is NULL");
  EXPECT_EQ(mg_bundle_launch(nullptr, "x", nullptr, nullptr, 0, nullptr), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mg_device_count(nullptr), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mg_device_describe(-2, nullptr), MG_ERROR_INVALID_ARGUMENT);
}

// Argument checks come before anything that needs the driver, so they give the same answer everywhere.
TEST(Api, LaunchArgumentChecks) {
  BundlePtr b = open(two_programs());
  const mg_program* attn = program_at(b.get(), 0);
  alignas(16) int x = 0;
  void* args[3] = {&x, &x, &x};
  EXPECT_EQ(mg_program_launch(attn, nullptr, args, 2, &x), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(
      mg_last_error(),
      "program 'attn' takes 3 arguments (inputs q, k; outputs o), got 2 (the workspace is passed on its "
      "own, not in args)");
  EXPECT_EQ(mg_program_launch(attn, nullptr, args, 4, &x), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mg_program_launch(attn, nullptr, nullptr, 3, &x), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mg_last_error(), "program 'attn': args is NULL");
  args[1] = nullptr;
  EXPECT_EQ(mg_program_launch(attn, nullptr, args, 3, &x), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mg_last_error(),
               "program 'attn': argument 1 ('k') is NULL; it needs a device buffer of 2097152 bytes");
  args[1] = &x;
  EXPECT_EQ(mg_program_launch(attn, nullptr, args, 3, nullptr), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mg_last_error(), "program 'attn' needs a workspace of 2112 bytes, got NULL");
  // Generated kernels use 16-byte accesses: a buffer at an odd offset is refused before any launch.
  args[2] = reinterpret_cast<char*>(&x) + 2;
  EXPECT_EQ(mg_program_launch(attn, nullptr, args, 3, &x), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mg_last_error(),
               "program 'attn': argument 2 ('o') is not 16-byte aligned (a view at an offset? pass a contiguous copy)");
  args[2] = &x;

  // Zero-sized tensors need no buffer; a program may have no inputs.
  Bundle fill = two_programs();
  fill.programs[1].kernels[0].params = {f32("c", Role::output, 0)};
  BundlePtr f = open(fill);
  void* none[1] = {nullptr};
  EXPECT_EQ(mg_program_launch(program_at(f.get(), 1), nullptr, none, 2, nullptr), MG_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mg_last_error(), "program 'add' takes 1 argument (outputs c), got 2");
  EXPECT_NE(mg_program_launch(program_at(f.get(), 1), nullptr, none, 1, nullptr), MG_ERROR_INVALID_ARGUMENT);
}

TEST(Api, LastErrorIsPerThread) {
  const mg_program* p = nullptr;
  EXPECT_EQ(mg_bundle_program(nullptr, 0, &p), MG_ERROR_INVALID_ARGUMENT);
  std::string other;
  std::thread t([&] {
    other = mg_last_error();
    mg_bundle* b = nullptr;
    mg_bundle_open_memory("x", 1, &b);
  });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_STREQ(mg_last_error(), "mg_bundle_program: bundle is NULL");
  // A successful call leaves the message alone.
  EXPECT_EQ(mg_program_describe(nullptr, nullptr), MG_ERROR_INVALID_ARGUMENT);
  BundlePtr b = open(two_programs());
  EXPECT_STREQ(mg_last_error(), "mg_program_describe: program or out is NULL");
}

// ---- no driver ----

// What dlopen says about libcuda.so.1 here, or "" when one is reachable after all (a GPU machine whose driver
// is in the default library path): then these tests cannot run.
std::string no_driver_reason() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib != nullptr) {
    dlclose(lib);
    return "";
  }
  return dlerror();
}

TEST(NoDriver, EveryGpuCallSaysSoExactlyWhileBundlesStillOpen) {
  const std::string reason = no_driver_reason();
  if (reason.empty()) GTEST_SKIP() << "a libcuda.so.1 is reachable on this machine";
  const std::string message = "no NVIDIA driver found (libcuda.so.1 could not be loaded: " + reason + ")";

  int count = -1;
  EXPECT_EQ(mg_device_count(&count), MG_ERROR_NO_DRIVER);
  EXPECT_EQ(mg_last_error(), message);
  EXPECT_EQ(count, 0);
  mg_device_info dev{};
  EXPECT_EQ(mg_device_describe(0, &dev), MG_ERROR_NO_DRIVER);

  BundlePtr b = open(two_programs());  // opening a bundle needs no driver
  ASSERT_TRUE(b);
  mg_program_info info{};
  ASSERT_EQ(mg_program_describe(program_at(b.get(), 1), &info), MG_OK);
  EXPECT_STREQ(info.name, "add");

  const mg_program* p = nullptr;
  EXPECT_EQ(mg_bundle_select_program(b.get(), "add", &p), MG_ERROR_NO_DRIVER);
  EXPECT_EQ(mg_last_error(), message);
  EXPECT_EQ(mg_program_prepare(program_at(b.get(), 1), nullptr), MG_ERROR_NO_DRIVER);
  alignas(16) int x = 0;
  void* args[3] = {&x, &x, &x};
  EXPECT_EQ(mg_program_launch(program_at(b.get(), 1), nullptr, args, 3, nullptr), MG_ERROR_NO_DRIVER);
  EXPECT_EQ(mg_last_error(), message);
  EXPECT_EQ(mg_bundle_launch(b.get(), "add", nullptr, args, 3, nullptr), MG_ERROR_NO_DRIVER);
  // A name the bundle lacks is found out without the driver.
  EXPECT_EQ(mg_bundle_select_program(b.get(), "nope", &p), MG_ERROR_NOT_FOUND);
  EXPECT_STREQ(mg_last_error(), "no program 'nope' in the bundle (it has 'attn', 'add')");
}

}  // namespace
}  // namespace morgana::runtime::testing
