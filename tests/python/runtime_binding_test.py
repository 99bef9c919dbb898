#!/usr/bin/env python3
"""Tests of the Python runtime binding (python/morgana/runtime.py), no GPU needed.

    python3 tests/python/runtime_binding_test.py            # from the checkout, after building build-test/ or build/

It finds, from the environment or else the first build folder of the checkout that has them:
  MORGANA_RUNTIME_LIB    libmorgana_runtime.so          (BUILD/runtime/libmorgana_runtime.so)
  MORGANA_FAKE_CUDA_DIR  the fake driver's folder         (BUILD/tests/runtime/fake_cuda, holding libcuda.so.1)
  MORGANA_BIN            optional: a morgana binary, to also open a bundle compiled from examples/lora.mg (needs
                         NVRTC; skipped when compiling fails)

Three processes, because the runtime loads the driver once per process: this one (bundles, introspection,
damaged files, no PyTorch imported), one with no driver reachable, and one with the fake driver
(tests/runtime/fake_cuda) on two fake GPUs, capability 9.0 and 8.0, where programs of a bundle written here are
selected, prepared and launched on host memory (the fake computes out = a + b). Exits non-zero on any failure.
"""

import ctypes
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "python"))

from morgana import runtime as rt  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def expect_error(fn, status, contains, what):
    try:
        fn()
    except rt.MorganaError as e:
        check(e.status in (status if isinstance(status, tuple) else (status,)),
              f"{what}: status {e.status_name}, expected {status}")
        check(e.status_name.startswith("MG_ERROR_"), f"{what}: status name {e.status_name}")
        check(contains in e.message, f"{what}: message {e.message!r} lacks {contains!r}")
        check(str(e).startswith(e.status_name + ": "), f"{what}: str() is {str(e)!r}")
        return e
    check(False, f"{what}: no MorganaError raised")
    return None


# ---- a bundle writer (docs/bundle-format.md), for bundles whose code objects the fake driver runs ----

def crc64_xz(data: bytes) -> int:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xC96C5795D7870F42 if c & 1 else c >> 1
        table.append(c)
    crc = 0xFFFFFFFFFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFFFFFFFFFF


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def write_bundle(variants, programs) -> bytes:
    """variants: [(target, kind, arch, payload bytes)]; programs: [(name, mugraph, workspace_bytes, [variant
    indices], [(entry, grid, block, smem, [(name, role, dtype, shape, strides)])])]."""
    m = struct.pack("<I", len(variants))
    for target, kind, arch, payload in variants:
        m += _str(target) + struct.pack("<BBBB", kind, 0, 0, 0) + _str(arch) + struct.pack("<Q", crc64_xz(payload))
    m += struct.pack("<I", len(programs))
    for name, mugraph, ws, refs, kernels in programs:
        m += _str(name) + _str(mugraph) + struct.pack("<Q", ws) + struct.pack("<I", len(refs))
        m += b"".join(struct.pack("<I", r) for r in refs) + struct.pack("<I", len(kernels))
        for entry, grid, block, smem, params in kernels:
            m += _str(entry) + struct.pack("<7I", *grid, *block, smem) + struct.pack("<I", len(params))
            for pname, role, dtype, shape, strides in params:
                m += _str(pname) + struct.pack("<BBBB", role, dtype, len(shape), 0)
                m += b"".join(struct.pack("<q", v) for v in list(shape) + list(strides))
    sections = [(1, 0, m)] + [(2, i, v[3]) for i, v in enumerate(variants)]
    offset = 32 + 32 * len(sections)
    placed = []
    for kind, sid, data in sections:
        offset = (offset + 15) // 16 * 16
        placed.append((kind, sid, offset, data))
        offset += len(data)
    size = offset
    out = bytearray(size)
    out[0:32] = b"\x89MGB\r\n\x1a\n" + struct.pack("<IIQII", 1, len(sections), size, 0, 0)
    for i, (kind, sid, off, data) in enumerate(placed):
        out[32 + 32 * i: 64 + 32 * i] = struct.pack("<IIQQQ", kind, sid, off, len(data), crc64_xz(data))
        out[off: off + len(data)] = data
    return bytes(out)


F32, INPUT, OUTPUT, WORKSPACE = 3, 1, 2, 3
N = 8
ADD_PARAMS = [("a", INPUT, F32, [N], [1]), ("b", INPUT, F32, [N], [1]), ("c", OUTPUT, F32, [N], [1])]


def fake_code(arch: str, impl: str) -> bytes:
    return f"fake {arch}\nfunc add_k0 params=3 impl={impl} n={N}\n".encode() + b"\0"


def test_bundle() -> bytes:
    """Two programs named `add` (sm_90a: a correct add; sm_80: one that gets element 0 wrong, so a caller sees
    which ran) and `add_ws`, which takes a 16-byte workspace."""
    variants = [("h200", 1, "sm_90a", fake_code("sm_90a", "add_f32")),
                ("a100", 1, "sm_80", fake_code("sm_80", "add_f32_bad"))]
    kernel = ("add_k0", (1, 1, 1), (32, 1, 1), 0, ADD_PARAMS)
    ws_kernel = ("add_k0", (1, 1, 1), (32, 1, 1), 0, ADD_PARAMS + [("ws", WORKSPACE, F32, [4], [1])])
    programs = [("add", "kernel add(a: f32[8], b: f32[8]) {\n  c = add(a, b)\n  return c\n}\n", 0, [0], [kernel]),
                ("add", "μGraph for a100\n", 0, [1], [kernel]),
                ("add_ws", "", 16, [0], [ws_kernel])]
    return write_bundle(variants, programs)


# ---- part 1: this process, no driver touched ----

def part_introspection(tmp: Path) -> None:
    check(crc64_xz(b"123456789") == 0x995DC9BBDF1939FA, "CRC-64/XZ check value")
    lib = rt.load()
    check(lib.api_version == rt.API_VERSION == rt.api_version(), "API version")
    check(rt.status_name(rt.Status.ERROR_NO_VARIANT) == "MG_ERROR_NO_VARIANT", "status name")
    check(rt.status_name(99) == "MG_STATUS_UNKNOWN", "unknown status name")
    # Every status of the header has its name.
    for s in rt.Status:
        check(rt.status_name(s) == ("MG_" + s.name), f"status {s.name}")

    data = test_bundle()
    path = tmp / "add.mgb"
    path.write_bytes(data)
    with rt.Bundle(path) as b:
        progs = b.programs
        check(len(progs) == 3, f"3 programs, got {len(progs)}")
        check(b.program_names == ["add", "add_ws"], f"names {b.program_names}")
        add = progs[0]
        check(add.name == "add" and add.index == 0, "program 0 is add")
        check((add.info.num_inputs, add.info.num_outputs, add.info.num_params) == (2, 1, 3), f"counts {add.info}")
        check(add.info.workspace_bytes == 0 and add.info.num_kernels == 1 and add.info.num_variants == 1,
              f"info {add.info}")
        check(add.info.mugraph.startswith("kernel add("), "μGraph text")
        check(progs[1].info.mugraph == "μGraph for a100\n", "UTF-8 μGraph text")
        a, bb, c = add.params
        check((a.name, a.role, a.dtype, a.shape, a.strides, a.span_bytes) ==
              ("a", rt.Role.INPUT, rt.DType.F32, (N,), (1,), 4 * N), f"param a: {a}")
        check(c.role == rt.Role.OUTPUT and add.outputs == [c] and add.inputs == [a, bb], "roles")
        check(add.workspace is None, "no workspace param")
        check(str(a) == "input a: f32[8]{1}", f"str(param) {a}")
        check([str(v) for v in add.variants] == ["h200 cubin sm_90a"], f"variants {add.variants}")
        check([str(v) for v in progs[1].variants] == ["a100 cubin sm_80"], f"variants {progs[1].variants}")
        check(add.variants[0].payload_bytes == len(fake_code("sm_90a", "add_f32")), "payload size")
        ws = progs[2]
        check(ws.info.workspace_bytes == 16 and ws.info.num_params == 4, "workspace program")
        check(ws.workspace is not None and ws.workspace.role == rt.Role.WORKSPACE, "workspace param")
        check(b.programs[0] is add, "programs are cached objects")
    check(b.closed, "closed after with")
    try:
        add.params  # plain data stays readable
        b.programs
        check(False, "programs of a closed bundle")
    except ValueError as e:
        check("closed" in str(e), f"closed message {e}")
    try:
        add.launch([0, 0, 0])
        check(False, "launch on a closed bundle")
    except ValueError:
        pass
    b.close()  # idempotent

    m = rt.Bundle.from_bytes(data)
    check([p.name for p in m.programs] == ["add", "add", "add_ws"], "from_bytes")
    m.close()

    # Damaged files: each a MorganaError with the runtime's status and message.
    expect_error(lambda: rt.Bundle(tmp / "missing.mgb"), rt.Status.ERROR_IO, "missing.mgb", "missing file")
    (tmp / "text.mgb").write_bytes(b"hello, this is not a bundle at all, but long enough for a header")
    expect_error(lambda: rt.Bundle(tmp / "text.mgb"), rt.Status.ERROR_BAD_BUNDLE, "not a morgana bundle",
                 "not a bundle")
    (tmp / "short.mgb").write_bytes(data[:20])
    expect_error(lambda: rt.Bundle(tmp / "short.mgb"), rt.Status.ERROR_BAD_BUNDLE, "truncated", "truncated file")
    flipped = bytearray(data)
    flipped[-3] ^= 0x01  # inside the last payload
    (tmp / "flipped.mgb").write_bytes(bytes(flipped))
    e = expect_error(lambda: rt.Bundle(tmp / "flipped.mgb"), rt.Status.ERROR_BAD_BUNDLE, "checksum",
                     "flipped payload bit")
    if e is not None:
        check(e.function == "mg_bundle_open", f"function {e.function}")
        check(rt.last_error() == e.message, "last_error() is the message")
    expect_error(lambda: rt.Bundle.from_bytes(data[:-1]), rt.Status.ERROR_BAD_BUNDLE, "", "truncated memory")

    # A bundle that breaks the parameter contract opens in no runtime.
    bad = write_bundle([("h200", 1, "sm_90a", fake_code("sm_90a", "add_f32"))],
                       [("p", "", 0, [0], [("k0", (1, 1, 1), (1, 1, 1), 0,
                                            [("o", OUTPUT, F32, [1], [1]), ("i", INPUT, F32, [1], [1])])])])
    expect_error(lambda: rt.Bundle.from_bytes(bad), rt.Status.ERROR_BAD_BUNDLE, "is an input after output",
                 "contract")

    # A bundle compiled by morgana, when a morgana binary and NVRTC are at hand.
    real = compiled_bundle(tmp)
    if real is not None:
        with rt.Bundle(real) as b:
            (p,) = b.programs
            check(p.name == "lora" and p.info.num_inputs == 4 and p.info.num_outputs == 1, f"lora: {p}")
            check([x.shape for x in p.inputs] == [(16, 256), (256, 4096), (256, 16), (16, 4096)], "lora shapes")
            check(all(x.dtype == rt.DType.F16 for x in p.inputs + p.outputs), "lora dtypes")
            check(any(v.kind == rt.VariantKind.CUBIN and v.arch == "sm_90a" for v in p.variants),
                  f"lora variants {p.variants}")
            print("  compiled bundle:", p)
    check("torch" not in sys.modules, "the binding imported torch")
    return real


def compiled_bundle(tmp: Path):
    """A bundle `morgana compile` made of examples/lora.mg, or None (no binary, no NVRTC). Compiled once, by the
    first process (morgana must not run with the fake driver on its library path), and handed to the others."""
    given = os.environ.get("MORGANA_TEST_LORA_BUNDLE")
    if given is not None:
        return Path(given) if given else None
    # MORGANA_BIN when that binary exists (scripts/test runs this test from a build of the runtime alone, whose
    # morgana is not built), else the checkout's.
    morgana = os.environ.get("MORGANA_BIN")
    if not morgana or not Path(morgana).exists():
        morgana = first_existing(["build-test/morgana", "build/morgana"])
    if not morgana:
        print("  (no morgana binary: the compiled-bundle checks are skipped)")
        return None
    out = tmp / "lora.mgb"
    try:
        # Without the library path meson gives a test that depends on the fake driver: NVRTC would load it.
        env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        r = subprocess.run([morgana, "compile", str(ROOT / "examples" / "lora.mg"), "--target", "h100", "-o",
                            str(out), "-q"], capture_output=True, text=True, env=env)
    except OSError as e:
        print(f"  (cannot run {morgana}: {e}; the compiled-bundle checks are skipped)")
        return None
    if r.returncode != 0:
        print("  (morgana compile failed, e.g. no NVRTC: the compiled-bundle checks are skipped)\n", r.stderr[-500:])
        return None
    return out


def first_existing(rel_paths):
    for rel in rel_paths:
        if (ROOT / rel).exists():
            return str(ROOT / rel)
    return None


# ---- part 2: no driver reachable ----

def part_no_driver(tmp: Path) -> None:
    try:
        rt.device_count()
    except rt.MorganaError as e:
        check(e.status == rt.Status.ERROR_NO_DRIVER, f"no driver: {e}")
        check(e.message.startswith("no NVIDIA driver found"), f"no-driver message {e.message!r}")
        with rt.Bundle.from_bytes(test_bundle()) as b:  # bundles still open and describe themselves
            check(len(b.programs) == 3, "programs without a driver")
            expect_error(lambda: b.select("add"), rt.Status.ERROR_NO_DRIVER, "no NVIDIA driver", "select")
            expect_error(lambda: b.programs[0].prepare(), rt.Status.ERROR_NO_DRIVER, "", "prepare")
            expect_error(lambda: b.programs[0].launch([16, 32, 48]), rt.Status.ERROR_NO_DRIVER, "", "launch")
            expect_error(lambda: b.programs[0].launch([16, 32, 40]), rt.Status.ERROR_INVALID_ARGUMENT,
                         "argument 2 ('c') is not 16-byte aligned", "misaligned")
        return
    print("  (a CUDA driver is reachable on this machine: the no-driver checks are skipped)")


# ---- part 3: the fake driver ----

def part_fake(tmp: Path) -> None:
    cuda = ctypes.CDLL("libcuda.so.1")  # the fake, through LD_LIBRARY_PATH: the same object the runtime dlopens
    check(rt.device_count() == 2, "two fake GPUs")  # loads the driver, cuInit
    d0 = rt.describe_device(0)
    check((d0.name, d0.arch, d0.cc_major, d0.cc_minor, d0.vendor) == ("NVIDIA H200", "sm_90", 9, 0, rt.Vendor.NVIDIA),
          f"device 0: {d0}")
    check(d0.sm_count == 132 and d0.smem_per_block_optin == 232448 and d0.driver_version == 13000, f"{d0}")
    expect_error(lambda: rt.describe_device(7), rt.Status.ERROR_NO_DEVICE, "no GPU 7", "device 7")
    expect_error(lambda: rt.describe_device(-1), rt.Status.ERROR_NO_CONTEXT, "no CUDA context", "no context")

    b = rt.Bundle.from_bytes(test_bundle())
    expect_error(lambda: b.select("add"), rt.Status.ERROR_NO_CONTEXT, "no CUDA context", "select without context")

    ctx = [ctypes.c_void_p(), ctypes.c_void_p()]
    for d in range(2):
        check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx[d]), d) == 0, "retain")

    def use(d):
        check(cuda.cuCtxSetCurrent(ctx[d]) == 0, "set current")

    def run_add(program, a, bvals, via_bundle=False):
        A = (ctypes.c_float * N)(*a)
        B = (ctypes.c_float * N)(*bvals)
        C = (ctypes.c_float * N)(*([float("nan")] * N))
        ptrs = [ctypes.addressof(A), ctypes.addressof(B), ctypes.addressof(C)]  # "device" memory is host memory
        if via_bundle:
            b.launch("add", ptrs, stream=0x5)
        else:
            program.launch(ptrs, stream=0x5)
        return list(C)

    a = [float(i) for i in range(N)]
    bv = [0.5 * i for i in range(N)]
    want = [x + y for x, y in zip(a, bv)]

    use(0)  # the H200
    check(rt.describe_device(-1).ordinal == 0, "current device 0")
    p = b.select("add")
    check(p is b.programs[0], f"select on 9.0 gives program 0, got {p}")
    v = p.prepare()
    check((v.index, v.arch, v.target) == (0, "sm_90a", "h200"), f"prepared variant {v}")
    check(run_add(p, a, bv) == want, "add on the H200")
    check(run_add(None, a, bv, via_bundle=True) == want, "Bundle.launch")
    log = fake_log(cuda)
    check("load sm_90a device=0" in log, f"the fake loaded sm_90a:\n{log}")
    check("launch add_k0" in log and "grid=1,1,1 block=32,1,1 smem=0 stream=5" in log, f"launch geometry:\n{log}")
    expect_error(lambda: p.launch([1, 2]), rt.Status.ERROR_INVALID_ARGUMENT, "", "two arguments for three")
    expect_error(lambda: b.select("sub"), rt.Status.ERROR_NOT_FOUND, "'add', 'add_ws'", "unknown program")
    ws = b.select("add_ws")
    expect_error(lambda: ws.launch([1, 2, 3]), rt.Status.ERROR_INVALID_ARGUMENT, "", "missing workspace")
    buf = (ctypes.c_char * 16)()
    A = (ctypes.c_float * N)(*a)
    C = (ctypes.c_float * N)()
    ws.launch([ctypes.addressof(A), ctypes.addressof(A), ctypes.addressof(C)], workspace=ctypes.addressof(buf))
    check(list(C) == [2 * x for x in a], "add_ws with a workspace")

    use(1)  # the A100: the other program of the name, whose code gets element 0 wrong
    p1 = b.select("add")
    check(p1 is b.programs[1], f"select on 8.0 gives program 1, got {p1}")
    check(p1.prepare().arch == "sm_80", "prepared sm_80")
    got = run_add(p1, a, bv)
    check(got[1:] == want[1:] and got[0] == want[0] + 1, f"the a100 program ran: {got}")
    expect_error(lambda: b.programs[0].prepare(), rt.Status.ERROR_NO_VARIANT, "compute capability 8.0",
                 "an sm_90a program on 8.0")

    fake_clear(cuda)
    b.close()
    check(fake_log(cuda).count("unload") == 2, f"close unloads both modules:\n{fake_log(cuda)}")

    real = compiled_bundle(tmp)
    if real is not None:  # real cubins: selection works, the fake refuses to load them
        use(0)
        with rt.Bundle(real) as rb:
            rp = rb.select("lora")
            check(rp.name == "lora", "select lora")
            e = expect_error(rp.prepare, (rt.Status.ERROR_DRIVER, rt.Status.ERROR_NO_VARIANT), "", "fake loads cubin")
            if e is not None:
                print("  the fake refusing a real cubin:", e)
    cuda.cuCtxSetCurrent(None)


# ---- part 4: the PyTorch layer's checks (CPU tensors: everything up to the device check) ----

def part_torch(tmp: Path) -> None:
    try:
        import torch
    except ImportError:
        print("  (no PyTorch: the PyTorch layer's checks are skipped)")
        return
    with rt.Bundle.from_bytes(test_bundle()) as b:
        add = b.programs[0]
        good = torch.ones(N, dtype=torch.float32)

        def expect_value_error(fn, contains, what):
            try:
                fn()
                check(False, f"{what}: no ValueError")
            except ValueError as e:
                check(contains in str(e), f"{what}: {str(e)!r} lacks {contains!r}")

        expect_value_error(lambda: add(good), "takes 2 input(s) (a, b), got 1", "input count")
        expect_value_error(lambda: add(good, [1.0] * N), "input 'b': expected a torch.Tensor, got list", "not a tensor")
        expect_value_error(lambda: add(good, good.half()), "input 'b': dtype torch.float16, the program needs "
                           "torch.float32 (f32)", "dtype")
        expect_value_error(lambda: add(good[:4], good), "input 'a': shape (4,), the program needs (8,)", "shape")
        expect_value_error(lambda: add(torch.ones(2 * N)[::2], good), "input 'a': strides (2,), the program needs (1,)",
                           "strides")
        expect_value_error(lambda: add(good, good), "input 'a': the tensor is on cpu, a CUDA tensor is needed",
                           "device")
        expect_value_error(lambda: add(good, good, out=[good, good]), "has 1 output(s), out= gives 2", "out count")
        expect_value_error(lambda: add(good, good, out=good.double()), "output 'c': dtype torch.float64", "out dtype")
    # A [2, 1] tensor's stride along its extent-1 dim addresses nothing: any value passes the stride check.
    p = rt.Param(0, "x", rt.Role.INPUT, rt.DType.F32, (2, 1), (1, 1), 8)
    t = torch.ones(2, 1).expand(2, 1)
    t2 = torch.ones(1, 2).t()  # strides (1, 2)
    for x in (t, t2):
        try:
            rt._check_tensor(torch, add, p, x)
        except ValueError as e:
            check(False, f"extent-1 stride refused: {e}")


def fake_log(cuda) -> str:
    cuda.fake_cuda_log.restype = ctypes.c_size_t
    n = cuda.fake_cuda_log(None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    cuda.fake_cuda_log(buf, n + 1)
    return buf.value.decode()


def fake_clear(cuda) -> None:
    cuda.fake_cuda_clear_log()


# ---- driver ----

def main() -> int:
    part = sys.argv[1] if len(sys.argv) > 1 else "all"
    build = first_existing(["build-test", "build"])
    env = dict(os.environ)
    if not env.get("MORGANA_RUNTIME_LIB") and build:
        env["MORGANA_RUNTIME_LIB"] = str(Path(build) / "runtime" / "libmorgana_runtime.so")
    os.environ.update(env)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        if part == "all":
            print("introspection, damaged files:", os.environ.get("MORGANA_RUNTIME_LIB"), flush=True)
            real = part_introspection(tmp)
            env["MORGANA_TEST_LORA_BUNDLE"] = str(real) if real else ""
            fake_dir = env.get("MORGANA_FAKE_CUDA_DIR") or (
                str(Path(build) / "tests" / "runtime" / "fake_cuda") if build else None)
            children = [("no-driver", {"LD_LIBRARY_PATH": str(tmp / "no-driver-here")}), ("torch", {})]
            if fake_dir and (Path(fake_dir) / "libcuda.so.1").exists():
                children.append(("fake", {"LD_LIBRARY_PATH": fake_dir, "MG_FAKE_DEVICES": "9.0,8.0"}))
            else:
                print("  (no fake driver built: the fake-driver checks are skipped)")
            for name, extra in children:
                print(f"{name}:", flush=True)
                r = subprocess.run([sys.executable, __file__, name], env={**env, **extra})
                check(r.returncode == 0, f"part {name} exited {r.returncode}")
        elif part == "no-driver":
            part_no_driver(tmp)
        elif part == "fake":
            part_fake(tmp)
        elif part == "torch":
            part_torch(tmp)
        else:
            print("usage: runtime_binding_test.py [all|no-driver|torch|fake]", file=sys.stderr)
            return 2
    if failures:
        print(f"{len(failures)} check(s) failed ({part})")
        return 1
    print(f"ok ({part})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
