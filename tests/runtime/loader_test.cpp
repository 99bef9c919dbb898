// The loader through the C API against the fake driver (fake_cuda/fake_cuda.c). Meson runs the FakeDriver
// tests with five fake GPUs, MG_FAKE_DEVICES=8.0,8.6,8.9,9.0,12.0 (ordinals 0..4), FakeNoGpu with none and
// FakeInitFails with a cuInit that fails. The fake's log shows what the runtime asked of the driver: which
// code object it loaded where, the launch geometry and arguments, the shared-memory opt-ins, the unloads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "tests/runtime/runtime_testing.h"

namespace morgana::runtime::testing {
namespace {

constexpr int kA100 = 0, kRtx3090 = 1, kL40s = 2, kH200 = 3, kRtx5090 = 4;

class FakeDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    ASSERT_EQ(mg_device_count(&count), MG_OK) << mg_last_error();  // loads the fake and runs cuInit
    ASSERT_EQ(count, 5) << "meson sets MG_FAKE_DEVICES=8.0,8.6,8.9,9.0,12.0";
    ASSERT_TRUE(fake().ok()) << "the fake driver's controls";
    // A fresh primary context per device and test: its id is new, so nothing cached by earlier tests applies.
    for (int d = 0; d < 5; ++d) ASSERT_EQ(fake().cuDevicePrimaryCtxRetain(&ctx_[d], d), 0);
    fake().clear_log();
  }
  void TearDown() override {
    fake().cuCtxSetCurrent(nullptr);
    for (int d = 0; d < 5; ++d) fake().cuDevicePrimaryCtxRelease_v2(d);
  }
  static Fake& fake() { return Fake::get(); }
  void use(int device) { ASSERT_EQ(fake().cuCtxSetCurrent(ctx_[device]), 0); }
  unsigned long long id(int device) {
    unsigned long long v = 0;
    EXPECT_EQ(fake().cuCtxGetId(ctx_[device], &v), 0);
    return v;
  }
  std::string ctx(int device) { return "ctx=" + std::to_string(id(device)); }

  void* ctx_[5] = {};
};

// Buffers the fake never touches (no impl=): any distinct non-null addresses do.
void* ptr(uintptr_t v) {
  return reinterpret_cast<void*>(v);
}

// sm_80, sm_89 and sm_90a cubins and compute_80 PTX (written without its NUL, as a compiler might).
Bundle selection_bundle(bool with_ptx) {
  Bundle b;
  const std::string f = "func attn_k0 params=3\n";
  b.variants.push_back(variant("a100", VariantKind::cubin, "sm_80", f));
  b.variants.push_back(variant("l40s", VariantKind::cubin, "sm_89", f));
  b.variants.push_back(variant("h200", VariantKind::cubin, "sm_90a", f));
  std::vector<uint32_t> refs = {0, 1, 2};
  if (with_ptx) {
    b.variants.push_back(variant("a100", VariantKind::ptx, "compute_80", f, /*terminated=*/false));
    refs.push_back(3);
  }
  b.programs.push_back(simple_program("attn", refs));
  return b;
}

TEST_F(FakeDriver, DescribesDevices) {
  mg_device_info d{};
  ASSERT_EQ(mg_device_describe(kH200, &d), MG_OK) << mg_last_error();
  EXPECT_EQ(d.vendor, MG_VENDOR_NVIDIA);
  EXPECT_EQ(d.ordinal, kH200);
  EXPECT_STREQ(d.name, "NVIDIA H200");
  EXPECT_STREQ(d.arch, "sm_90");
  EXPECT_EQ(d.cc_major, 9);
  EXPECT_EQ(d.sm_count, 132);
  EXPECT_EQ(d.smem_per_block, 49152);
  EXPECT_EQ(d.smem_per_block_optin, 232448);
  EXPECT_EQ(d.max_threads_per_block, 1024);
  EXPECT_EQ(d.driver_version, 13000);
  EXPECT_EQ(mg_device_describe(5, &d), MG_ERROR_NO_DEVICE);
  EXPECT_STREQ(mg_last_error(), "no GPU 5 (the driver sees 5)");

  EXPECT_EQ(mg_device_describe(-1, &d), MG_ERROR_NO_CONTEXT);
  EXPECT_STREQ(
      mg_last_error(),
      "no CUDA context is current on this thread (make one current first, e.g. with cudaSetDevice or "
      "cuCtxSetCurrent)");
  use(kRtx5090);
  ASSERT_EQ(mg_device_describe(-1, &d), MG_OK);
  EXPECT_STREQ(d.arch, "sm_120");
  EXPECT_EQ(d.ordinal, kRtx5090);
}

TEST_F(FakeDriver, ChoosesTheVariantPerDevice) {
  struct Case {
    int device;
    const char* with_ptx;     // the arch loaded from the bundle with PTX
    const char* cubins_only;  // and from the one without, or nullptr for an error
  };
  const Case cases[] = {{kA100, "sm_80", "sm_80"},
                        {kRtx3090, "sm_80", "sm_80"},
                        {kL40s, "sm_89", "sm_89"},
                        {kH200, "sm_90a", "sm_90a"},
                        {kRtx5090, "compute_80", nullptr}};
  for (bool ptx : {true, false}) {
    BundlePtr b = open(selection_bundle(ptx));
    const mg_program* attn = program_at(b.get(), 0);
    for (const Case& c : cases) {
      SCOPED_TRACE("device " + std::to_string(c.device) + (ptx ? " with PTX" : " cubins only"));
      use(c.device);
      fake().clear_log();
      size_t chosen = 99;
      const char* want = ptx ? c.with_ptx : c.cubins_only;
      mg_status s = mg_program_prepare(attn, &chosen);
      if (want == nullptr) {
        EXPECT_EQ(s, MG_ERROR_NO_VARIANT);
        EXPECT_STREQ(
            mg_last_error(),
            "no code for NVIDIA GPU compute capability 12.0 (sm_120) in program 'attn': the bundle has "
            "cubin sm_80 (a100), cubin sm_89 (l40s), cubin sm_90a (h200); add a target for this GPU or "
            "include PTX");
        EXPECT_TRUE(fake().lines("load").empty());
        continue;
      }
      ASSERT_EQ(s, MG_OK) << mg_last_error();
      mg_variant_info v{};
      ASSERT_EQ(mg_program_variant(attn, chosen, &v), MG_OK);
      EXPECT_STREQ(v.arch, want);
      EXPECT_EQ(fake().lines("load"),
                std::vector<std::string>{"load " + std::string(want) + " device=" + std::to_string(c.device) +
                                         " " + ctx(c.device) + " result=0"});
    }
  }
}

TEST_F(FakeDriver, LoadsOncePerContextAndLaunchesWithTheArgumentsInOrder) {
  BundlePtr b = open(selection_bundle(true));
  const mg_program* attn = program_at(b.get(), 0);
  void* args[3] = {ptr(0xa000), ptr(0xb000), ptr(0xc000)};
  use(kH200);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(mg_program_launch(attn, ptr(0x5eed), args, 3, nullptr), MG_OK) << mg_last_error();
  EXPECT_EQ(fake().lines("load").size(), 1u) << "the module is cached";
  const std::string launch =
      "launch attn_k0 " + ctx(kH200) + " grid=4,1,1 block=256,1,1 smem=0 stream=5eed args=a000,b000,c000";
  EXPECT_EQ(fake().lines("launch"), (std::vector<std::string>{launch, launch, launch}));

  use(kA100);  // another context loads its own
  ASSERT_EQ(mg_bundle_launch(b.get(), "attn", nullptr, args, 3, nullptr), MG_OK) << mg_last_error();
  ASSERT_EQ(mg_bundle_launch(b.get(), "attn", nullptr, args, 3, nullptr), MG_OK);
  std::vector<std::string> loads = fake().lines("load");
  ASSERT_EQ(loads.size(), 2u);
  EXPECT_EQ(loads[1], "load sm_80 device=0 " + ctx(kA100) + " result=0");
  EXPECT_EQ(fake().lines("launch").size(), 5u);
}

// Workspace last, after the outputs; every kernel gets the same list.
TEST_F(FakeDriver, WorkspaceIsTheLastKernelParameterOfEveryKernel) {
  Bundle b;
  b.variants.push_back(
      variant("h200", VariantKind::cubin, "sm_90a", "func s_k0 params=4\nfunc s_k1 params=4\n"));
  std::vector<Parameter> params = {f32("x", Role::input, 64), f32("z", Role::input, 64),
                                   f32("y", Role::output, 1), f32("partial", Role::workspace, 8)};
  b.programs.push_back(Program{
      "s",
      "",
      32,
      {Kernel{"s_k0", {8, 1, 1}, {64, 1, 1}, 256, params}, Kernel{"s_k1", {1, 1, 1}, {32, 1, 1}, 0, params}},
      {0}});
  BundlePtr open_b = open(b);
  use(kH200);
  void* args[3] = {ptr(0x100), ptr(0x200), ptr(0x300)};
  ASSERT_EQ(mg_program_launch(program_at(open_b.get(), 0), nullptr, args, 3, ptr(0x400)), MG_OK)
      << mg_last_error();
  const std::string c = ctx(kH200);
  EXPECT_EQ(fake().lines("launch"),
            (std::vector<std::string>{
                "launch s_k0 " + c + " grid=8,1,1 block=64,1,1 smem=256 stream=0 args=100,200,300,400",
                "launch s_k1 " + c + " grid=1,1,1 block=32,1,1 smem=0 stream=0 args=100,200,300,400"}));
}

// A kernel that uses the copy engine takes its tensor maps by value after the parameters and the workspace, each
// built at launch from the caller's pointer for its parameter: shape and strides innermost first (strides in bytes,
// the innermost left out), the bundle's box and swizzle, zeros outside the tensor.
TEST_F(FakeDriver, TensorMapsFollowTheParametersAndTheWorkspace) {
  Bundle b;
  b.variants.push_back(variant("h200", VariantKind::cubin, "sm_90a", "func t_k0 params=6\n"));
  std::vector<Parameter> params = {Parameter{"w", Role::input, DType::f16, {64, 256}, {256, 1}},
                                   Parameter{"x", Role::input, DType::bf16, {4, 2, 64}, {128, 64, 1}},
                                   f32("y", Role::output, 1), f32("partial", Role::workspace, 8)};
  b.programs.push_back(Program{"t",
                               "",
                               32,
                               {Kernel{"t_k0", {8, 1, 1}, {128, 1, 1}, 0, params,
                                       {TensorMap{0, {32, 64}, 128}, TensorMap{1, {1, 2, 64}, 0}}}},
                               {0}});
  BundlePtr open_b = open(b);
  use(kH200);
  void* args[3] = {ptr(0x1000), ptr(0x2000), ptr(0x3000)};
  ASSERT_EQ(mg_program_launch(program_at(open_b.get(), 0), nullptr, args, 3, ptr(0x4000)), MG_OK)
      << mg_last_error();
  EXPECT_EQ(fake().lines("tensormap"),
            (std::vector<std::string>{
                "tensormap type=6 rank=2 dims=256,64 strides=512 box=64,32 swizzle=3 interleave=0 l2=2 oob=0",
                "tensormap type=9 rank=3 dims=64,2,4 strides=128,256 box=64,2,1 swizzle=0 interleave=0 l2=2 oob=0"}));
  // The fake prints each argument's first 8 bytes: a map's is the address it was built from.
  EXPECT_EQ(fake().lines("launch"),
            (std::vector<std::string>{"launch t_k0 " + ctx(kH200) +
                                      " grid=8,1,1 block=128,1,1 smem=0 stream=0 args=1000,2000,3000,4000,1000,2000"}));
  // A pointer the engine cannot take (not 16-byte aligned) is refused before it is built, as for every kernel.
  void* odd[3] = {ptr(0x1008), ptr(0x2000), ptr(0x3000)};
  EXPECT_EQ(mg_program_launch(program_at(open_b.get(), 0), nullptr, odd, 3, ptr(0x4000)), MG_ERROR_INVALID_ARGUMENT);
}

Bundle smem_bundle(uint32_t dynamic, int static_smem = 0) {
  Bundle b;
  b.variants.push_back(variant("any", VariantKind::cubin, "sm_80",
                               "func k_k0 params=3 smem=" + std::to_string(static_smem) + "\n"));
  b.variants.push_back(variant("any", VariantKind::cubin, "sm_90",
                               "func k_k0 params=3 smem=" + std::to_string(static_smem) + "\n"));
  b.programs.push_back(simple_program("k", {0, 1}, 1024, dynamic));
  return b;
}

TEST_F(FakeDriver, OptsInToMoreSharedMemoryOnlyBeyondTheDefault) {
  void* args[3] = {ptr(0x1000), ptr(0x2000), ptr(0x3000)};
  use(kH200);
  {
    BundlePtr b = open(smem_bundle(49152));  // exactly the default: no opt-in
    ASSERT_EQ(mg_program_launch(program_at(b.get(), 0), nullptr, args, 3, nullptr), MG_OK) << mg_last_error();
    EXPECT_TRUE(fake().lines("setattr").empty());
  }
  {
    BundlePtr b = open(smem_bundle(49153));
    ASSERT_EQ(mg_program_launch(program_at(b.get(), 0), nullptr, args, 3, nullptr), MG_OK) << mg_last_error();
    EXPECT_EQ(fake().lines("setattr"), std::vector<std::string>{"setattr k_k0 attr=8 value=49153"});
  }
  fake().clear_log();
  {
    // Static shared memory counts against the same budget: 40000 dynamic + 16384 static needs the opt-in.
    BundlePtr b = open(smem_bundle(40000, 16384));
    ASSERT_EQ(mg_program_launch(program_at(b.get(), 0), nullptr, args, 3, nullptr), MG_OK) << mg_last_error();
    EXPECT_EQ(fake().lines("setattr"), std::vector<std::string>{"setattr k_k0 attr=8 value=40000"});
  }
  fake().clear_log();
  {
    // The default is the device's, not a constant: with a 64 KiB default, 60000 bytes need no opt-in.
    fake().set_attribute(kA100, 8, 65536);
    use(kA100);
    BundlePtr b = open(smem_bundle(60000));
    ASSERT_EQ(mg_program_launch(program_at(b.get(), 0), nullptr, args, 3, nullptr), MG_OK) << mg_last_error();
    EXPECT_TRUE(fake().lines("setattr").empty());
    fake().set_attribute(kA100, 8, 49152);
  }
}

TEST_F(FakeDriver, RefusesMoreSharedMemoryThanTheDeviceAllows) {
  void* args[3] = {ptr(0x1000), ptr(0x2000), ptr(0x3000)};
  BundlePtr b = open(smem_bundle(120000, 1024));
  const mg_program* k = program_at(b.get(), 0);
  use(kH200);  // 227 KiB per block: fine
  ASSERT_EQ(mg_program_launch(k, nullptr, args, 3, nullptr), MG_OK) << mg_last_error();
  use(kRtx3090);  // 99 KiB per block
  EXPECT_EQ(mg_program_launch(k, nullptr, args, 3, nullptr), MG_ERROR_RESOURCES);
  EXPECT_STREQ(
      mg_last_error(),
      "kernel 0 (k_k0) of program 'k' on NVIDIA GeForce RTX 3090 (sm_86): needs 121024 bytes of shared "
      "memory per block (120000 dynamic + 1024 static), the device allows at most 101376");
  EXPECT_EQ(fake().lines("launch").size(), 1u);
}

Bundle block_bundle(bundle::Dim3 block, const std::string& attributes = "") {
  Bundle b;
  b.variants.push_back(
      variant("h200", VariantKind::cubin, "sm_90a", "func k_k0 params=3 " + attributes + "\n"));
  b.programs.push_back(simple_program("k", {0}));
  b.programs[0].kernels[0].block = block;
  return b;
}

TEST_F(FakeDriver, RefusesBlocksTheDeviceOrTheKernelCannotRun) {
  void* args[3] = {ptr(0x1000), ptr(0x2000), ptr(0x3000)};
  use(kH200);
  {
    BundlePtr b = open(block_bundle({64, 32, 1}));
    EXPECT_EQ(mg_program_launch(program_at(b.get(), 0), nullptr, args, 3, nullptr), MG_ERROR_RESOURCES);
    EXPECT_STREQ(
        mg_last_error(),
        "kernel 0 (k_k0) of program 'k' on NVIDIA H200 (sm_90): 2048 threads per block, the device allows "
        "at most 1024");
  }
  {
    BundlePtr b = open(block_bundle({1, 1, 128}));
    EXPECT_EQ(mg_program_launch(program_at(b.get(), 0), nullptr, args, 3, nullptr), MG_ERROR_RESOURCES);
    EXPECT_STREQ(mg_last_error(),
                 "kernel 0 (k_k0) of program 'k' on NVIDIA H200 (sm_90): block 1x1x128 exceeds the device's "
                 "largest block 1024x1024x64");
  }
  {
    // Registers: the kernel's own limit, from the driver, can be below the device's.
    BundlePtr b = open(block_bundle({1024, 1, 1}, "regs=128 maxthreads=512"));
    EXPECT_EQ(mg_program_launch(program_at(b.get(), 0), nullptr, args, 3, nullptr), MG_ERROR_RESOURCES);
    EXPECT_STREQ(
        mg_last_error(),
        "kernel 0 (k_k0) of program 'k' on NVIDIA H200 (sm_90): 1024 threads per block, but with 128 "
        "registers per thread it can run at most 512");
  }
  {
    Bundle big = block_bundle({128, 1, 1});
    big.programs[0].kernels[0].grid = {1, 70000, 1};
    BundlePtr b = open(big);
    EXPECT_EQ(mg_program_launch(program_at(b.get(), 0), nullptr, args, 3, nullptr), MG_ERROR_RESOURCES);
    EXPECT_STREQ(mg_last_error(),
                 "kernel 0 (k_k0) of program 'k' on NVIDIA H200 (sm_90): grid 1x70000x1 exceeds the device's "
                 "largest grid 2147483647x65535x65535");
  }
  {
    // The limit is read from the device.
    fake().set_attribute(kL40s, 1, 512);
    use(kL40s);
    Bundle any = block_bundle({1024, 1, 1});
    any.variants[0] = variant("l40s", VariantKind::cubin, "sm_89", "func k_k0 params=3\n");
    BundlePtr l = open(any);
    EXPECT_EQ(mg_program_launch(program_at(l.get(), 0), nullptr, args, 3, nullptr), MG_ERROR_RESOURCES);
    EXPECT_STREQ(
        mg_last_error(),
        "kernel 0 (k_k0) of program 'k' on NVIDIA L40S (sm_89): 1024 threads per block, the device allows "
        "at most 512");
    fake().set_attribute(kL40s, 1, 1024);
  }
  EXPECT_TRUE(fake().lines("launch").empty());
}

TEST_F(FakeDriver, DriverErrorsCarryTheirNameAndLog) {
  void* args[3] = {ptr(0x1000), ptr(0x2000), ptr(0x3000)};
  use(kA100);
  {
    Bundle b = selection_bundle(false);
    b.variants[0] =
        variant("a100", VariantKind::ptx, "compute_80",
                "fail 218 ptxas fatal   : Unresolved extern function 'helper'\nline 2 of the log\n");
    BundlePtr open_b = open(b);
    EXPECT_EQ(mg_program_launch(program_at(open_b.get(), 0), nullptr, args, 3, nullptr), MG_ERROR_DRIVER);
    EXPECT_STREQ(
        mg_last_error(),
        "program 'attn': loading variant 0 (a100, ptx compute_80) on NVIDIA A100-SXM4-80GB (sm_80) "
        "(cuModuleLoadDataEx): CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed); the driver's log: "
        "ptxas fatal   : Unresolved extern function 'helper'");
  }
  {
    // The driver refusing code the rules accepted is a missing variant too.
    Bundle b = selection_bundle(false);
    b.variants[0] = variant("a100", VariantKind::cubin, "sm_80", "fail 209 \n");
    BundlePtr open_b = open(b);
    EXPECT_EQ(mg_program_launch(program_at(open_b.get(), 0), nullptr, args, 3, nullptr), MG_ERROR_NO_VARIANT);
    EXPECT_STREQ(
        mg_last_error(),
        "program 'attn': loading variant 0 (a100, cubin sm_80) on NVIDIA A100-SXM4-80GB (sm_80) "
        "(cuModuleLoadDataEx): CUDA_ERROR_NO_BINARY_FOR_GPU (no kernel image is available for execution "
        "on the device)");
  }
  {
    Bundle b = selection_bundle(false);
    b.variants[0] = variant("a100", VariantKind::cubin, "sm_80", "func other params=3\n");
    BundlePtr open_b = open(b);
    EXPECT_EQ(mg_program_launch(program_at(open_b.get(), 0), nullptr, args, 3, nullptr), MG_ERROR_BAD_BUNDLE);
    EXPECT_STREQ(
        mg_last_error(),
        "kernel 0 (attn_k0) of program 'attn' on NVIDIA A100-SXM4-80GB (sm_80): the code object has no "
        "entry point 'attn_k0'");
  }
  {
    Bundle b;
    b.variants.push_back(variant("a100", VariantKind::cubin, "sm_80",
                                 "func two_k0 params=3\nfunc two_k1 params=3 launch_result=701\n"));
    b.programs.push_back(simple_program("two", {0}));
    b.programs[0].kernels.push_back(b.programs[0].kernels[0]);
    b.programs[0].kernels[1].name = "two_k1";
    BundlePtr open_b = open(b);
    EXPECT_EQ(mg_program_launch(program_at(open_b.get(), 0), nullptr, args, 3, nullptr), MG_ERROR_LAUNCH);
    EXPECT_STREQ(mg_last_error(),
                 "launching kernel 1 (two_k1) of program 'two' (kernels 0..0 are queued): "
                 "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (too many resources requested for launch)");
  }
}

TEST_F(FakeDriver, NeedsACurrentContext) {
  BundlePtr b = open(selection_bundle(true));
  void* args[3] = {ptr(0x1000), ptr(0x2000), ptr(0x3000)};
  EXPECT_EQ(mg_program_launch(program_at(b.get(), 0), nullptr, args, 3, nullptr), MG_ERROR_NO_CONTEXT);
  const mg_program* p = nullptr;
  EXPECT_EQ(mg_bundle_select_program(b.get(), "attn", &p), MG_ERROR_NO_CONTEXT);
}

// Two programs of one name for different GPUs: the device picks one, by the best variant over both.
TEST_F(FakeDriver, SelectsAmongProgramsOfOneName) {
  Bundle b;
  b.variants.push_back(variant("a100", VariantKind::cubin, "sm_80", "func attn_k0 params=3\n"));
  b.variants.push_back(variant("h200", VariantKind::cubin, "sm_90a", "func attn_k0 params=3\n"));
  b.variants.push_back(variant("a100", VariantKind::ptx, "compute_80", "func attn_k0 params=3\n"));
  b.programs.push_back(simple_program("attn", {0, 2}, 1024));
  b.programs.push_back(simple_program("attn", {1}, 1024));
  b.programs[1].mugraph = "the H200 one\n";
  BundlePtr open_b = open(b);
  const mg_program* p = nullptr;
  mg_program_info info{};
  use(kH200);
  ASSERT_EQ(mg_bundle_select_program(open_b.get(), "attn", &p), MG_OK) << mg_last_error();
  EXPECT_EQ(p, program_at(open_b.get(), 1));
  use(kRtx3090);
  ASSERT_EQ(mg_bundle_select_program(open_b.get(), "attn", &p), MG_OK);
  EXPECT_EQ(p, program_at(open_b.get(), 0));
  use(kRtx5090);  // only the A100 program's PTX runs there
  ASSERT_EQ(mg_bundle_select_program(open_b.get(), "attn", &p), MG_OK);
  ASSERT_EQ(mg_program_describe(p, &info), MG_OK);
  EXPECT_STREQ(info.mugraph, "kernel attn\n");
  EXPECT_TRUE(fake().lines("load").empty()) << "selecting loads nothing";
  // Launching the H200's program elsewhere is still checked against that device.
  EXPECT_EQ(mg_program_prepare(program_at(open_b.get(), 1), nullptr), MG_ERROR_NO_VARIANT);
}

TEST_F(FakeDriver, ConcurrentLaunchesFromEightThreads) {
  Bundle b = selection_bundle(true);
  b.programs.push_back(simple_program("attn2", {0, 1, 2, 3}));
  for (Variant& v : b.variants)
    v.payload =
        fake_code(v.arch, "func attn_k0 params=3\nfunc attn2_k0 params=3\n", v.kind != VariantKind::ptx);
  BundlePtr open_b = open(b);
  const int kThreads = 8, kLaunches = 200;
  std::atomic<int> failures{0};
  std::mutex mu;
  std::string first_error;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const int device = t % 5;
      if (fake().cuCtxSetCurrent(ctx_[device]) != 0) ++failures;
      void* args[3] = {ptr(0x1000), ptr(0x2000), ptr(0x3000)};
      for (int i = 0; i < kLaunches; ++i) {
        const char* name = (i + t) % 2 ? "attn" : "attn2";
        if (mg_bundle_launch(open_b.get(), name, nullptr, args, 3, nullptr) != MG_OK && failures++ == 0) {
          std::lock_guard lock(mu);
          first_error = mg_last_error();
        }
      }
      fake().cuCtxSetCurrent(nullptr);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << first_error;
  EXPECT_EQ(fake().lines("launch").size(), static_cast<size_t>(kThreads * kLaunches));
  // One load per context, shared by both programs (they use the same code objects) and all threads.
  std::vector<std::string> loads = fake().lines("load");
  EXPECT_EQ(loads.size(), 5u);
  for (int d = 0; d < 5; ++d)
    EXPECT_EQ(
        std::count_if(loads.begin(), loads.end(),
                      [&](const std::string& l) { return l.find(" " + ctx(d) + " ") != std::string::npos; }),
        1)
        << "device " << d;
}

TEST_F(FakeDriver, CloseUnloadsInLiveContextsOnly) {
  BundlePtr b = open(selection_bundle(true));
  const mg_program* attn = program_at(b.get(), 0);
  for (int d : {kA100, kL40s, kH200, kRtx5090}) {
    use(d);
    ASSERT_EQ(mg_program_prepare(attn, nullptr), MG_OK) << mg_last_error();
  }
  // The L40S's context dies (its modules with it); the RTX 5090's is destroyed and made again: same handle,
  // new id, so the loader must load afresh rather than reuse the dead module.
  const std::string old5090 = ctx(kRtx5090), l40s = ctx(kL40s);
  fake().cuCtxSetCurrent(nullptr);
  fake().cuDevicePrimaryCtxRelease_v2(kL40s);
  fake().cuDevicePrimaryCtxRelease_v2(kRtx5090);
  void* again = nullptr;
  ASSERT_EQ(fake().cuDevicePrimaryCtxRetain(&again, kRtx5090), 0);
  ASSERT_EQ(again, ctx_[kRtx5090]);
  use(kRtx5090);
  ASSERT_EQ(mg_program_prepare(attn, nullptr), MG_OK) << mg_last_error();
  EXPECT_EQ(fake().lines("load").back(), "load compute_80 device=4 " + ctx(kRtx5090) + " result=0");
  EXPECT_NE(ctx(kRtx5090), old5090);
  fake().cuCtxSetCurrent(nullptr);

  fake().clear_log();
  b.reset();
  std::vector<std::string> unloads = fake().lines("unload");
  std::sort(unloads.begin(), unloads.end());
  std::vector<std::string> want = {"unload compute_80 " + ctx(kRtx5090) + " result=0",
                                   "unload sm_80 " + ctx(kA100) + " result=0",
                                   "unload sm_90a " + ctx(kH200) + " result=0"};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(unloads, want) << "nothing for " << l40s << " or " << old5090;
  // The L40S's context is retained again so that TearDown's release balances.
  ASSERT_EQ(fake().cuDevicePrimaryCtxRetain(&again, kL40s), 0);
}

// ---- no GPU, and a driver that fails to start ----

TEST(FakeNoGpu, SaysThereIsNoGpu) {
  int count = -1;
  EXPECT_EQ(mg_device_count(&count), MG_ERROR_NO_DEVICE);
  EXPECT_STREQ(mg_last_error(),
               "no NVIDIA GPU found: cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)");
  BundlePtr b = open(selection_bundle(true));
  void* args[3] = {ptr(0x1000), ptr(0x2000), ptr(0x3000)};
  EXPECT_EQ(mg_bundle_launch(b.get(), "attn", nullptr, args, 3, nullptr), MG_ERROR_NO_DEVICE);
}

TEST(FakeInitFails, SaysWhy) {
  int count = -1;
  EXPECT_EQ(mg_device_count(&count), MG_ERROR_DRIVER);
  EXPECT_STREQ(
      mg_last_error(),
      "the NVIDIA driver failed to start: cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (system has unsupported "
      "display driver / cuda driver combination)");
}

}  // namespace
}  // namespace morgana::runtime::testing
