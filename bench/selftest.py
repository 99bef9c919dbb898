"""Checks of the benchmark's spec reader and PyTorch translation that need no GPU (`python3 -m bench selftest`).

1. Every spec given (default: examples/*.mg and tests/gpu/specs/*.mg) parses, and the shape of every value equals
   what `morgana check` prints for it.
2. The float64 translation run on CPU, on the very inputs `morgana eval` draws (its splitmix64 stream, rounded to
   the dtype), gives outputs of those shapes whose sum and sum of |x| equal the checksums `morgana eval` prints
   (morgana's own float reference, f64 mode) to 1e-6 relative: the translation means what morgana means.
3. Small specs against values computed by hand (reduce with `to`, rms_norm, softmax, broadcasting, concat, the
   scalar ops, gelu's erf form), the attention pattern detection, the SDPA path (where this PyTorch has
   SDPA's `scale`), the error messages of bad specs.
Needs PyTorch (any version, CPU is enough) and numpy; the checks against morgana need a morgana binary.
"""

from __future__ import annotations

import glob
import math
import re
import subprocess
import sys
from pathlib import Path

from . import spec as S
from . import torch_spec as T

ROOT = Path(__file__).resolve().parent.parent

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("  FAIL:", what, flush=True)


# ---- morgana eval's inputs (verify/float_domain.cpp random_input, verify/splitmix.h) ----

def eval_inputs(kernel: S.Kernel, seed: int = 1):
    """The inputs `morgana eval --seed N` draws: element i (counting over every input, in order, row-major) is
    2u-1 with u = (mix64(seed + (i+1)·γ) >> 11)·2^-53, rounded to the input's dtype; returned as float64."""
    import numpy as np  # noqa: PLC0415
    import torch  # noqa: PLC0415
    gamma = np.uint64(0x9E3779B97F4A7C15)
    out, first = [], 0
    with np.errstate(over="ignore"):
        for p in kernel.params:
            i = np.arange(first + 1, first + p.numel + 1, dtype=np.uint64)
            z = np.uint64(seed) + i * gamma
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            z = z ^ (z >> np.uint64(31))
            u = (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
            x = 2 * u - 1
            # Rounded once, to nearest even, as round_to_dtype: numpy converts float64 to float16 directly
            # (PyTorch goes through float32, and that double rounding differs in rare halfway cases).
            if p.dtype == "f16":
                x = x.astype(np.float16).astype(np.float64)
            elif p.dtype == "f32":
                x = x.astype(np.float32).astype(np.float64)
            x = torch.from_numpy(x).reshape(p.shape)
            if p.dtype == "bf16":  # numpy has no bfloat16: rounded on the bit pattern
                x = _bf16(x)
            out.append(x)
            first += p.numel
    return out


def _bf16(x):
    """float64 -> bfloat16 with one round to nearest even on the bit pattern, as ir::round_to_dtype."""
    import numpy as np  # noqa: PLC0415
    import torch  # noqa: PLC0415
    bits = x.numpy().view(np.uint64).copy()
    shift = np.uint64(52 - 7)
    half = np.uint64((1 << (52 - 7 - 1)) - 1)
    bits = (bits + half + ((bits >> shift) & np.uint64(1))) & ~np.uint64((1 << (52 - 7)) - 1)
    return torch.from_numpy(bits.view(np.float64))


_EVAL_LINE = re.compile(r"^\s+(\w+): (\w+)\[([0-9,]+)\] sum=(\S+) abs_sum=(\S+)$")
_CHECK_LINE = re.compile(r"^\s+(\w+): (\w+)\[([0-9,]+)\]")


def morgana_types(morgana: str, path: str):
    r = subprocess.run([morgana, "check", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"morgana check {path}: {r.stderr.strip()}")
    types = {}
    for line in r.stdout.splitlines():
        m = _CHECK_LINE.match(line)
        if m and not line.strip().startswith("return"):
            types[m.group(1)] = (m.group(2), tuple(int(x) for x in m.group(3).split(",")))
    return types


def morgana_checksums(morgana: str, path: str):
    r = subprocess.run([morgana, "eval", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"morgana eval {path}: {r.stderr.strip()}")
    sums = []
    for line in r.stdout.splitlines():
        m = _EVAL_LINE.match(line)
        if m:
            sums.append((m.group(1), tuple(int(x) for x in m.group(3).split(",")), float(m.group(4)),
                         float(m.group(5))))
    return sums


def check_spec_file(path: str, morgana, listed: bool) -> None:
    import torch  # noqa: PLC0415
    name = Path(path).name
    try:
        k = S.parse_file(path)
    except S.MugraphError as e:
        # tests/gpu/specs holds μGraphs too (the gpu suite runs both); a file named on the command line must be a spec.
        check(not listed, f"{name}: {e}")
        print(f"  {name}: a μGraph, skipped", flush=True)
        return
    except S.SpecError as e:
        check(False, f"{name}: {e}")
        return
    print(f"  {name}: {len(k.stmts)} ops, outputs {k.output_shapes()}, {k.matmul_flops() / 1e9:.3f} GFLOP, "
          f"{k.bytes_once() / 1e6:.3f} MB once, attention patterns {len(k.attention_patterns())}", flush=True)
    if morgana:
        want = morgana_types(morgana, path)
        got = {n: t for n, t in k.types.items()}
        check(got == want, f"{name}: shapes differ from morgana check:\n    ours    {got}\n    morgana {want}")
    fn = T.to_function(k)
    inputs = eval_inputs(k) if morgana else [torch.randn(p.shape, dtype=torch.float64) for p in k.params]
    outs = fn(*inputs)
    check([tuple(o.shape) for o in outs] == k.output_shapes(), f"{name}: output shapes {[o.shape for o in outs]}")
    check(all(o.dtype == torch.float64 for o in outs), f"{name}: float64 stays float64")
    if morgana:
        sums = morgana_checksums(morgana, path)
        check(len(sums) == len(outs), f"{name}: {len(sums)} checksums for {len(outs)} outputs")
        for (oname, shape, s, a), o in zip(sums, outs):
            check(shape == tuple(o.shape), f"{name}: {oname} shape {shape} vs {tuple(o.shape)}")
            os_, oa = float(o.sum()), float(o.abs().sum())
            ok = abs(os_ - s) <= 1e-6 * a + 1e-9 and abs(oa - a) <= 1e-6 * a + 1e-9
            check(ok, f"{name}: {oname} sum {os_:.7e} abs_sum {oa:.7e}, morgana eval {s:.7e} {a:.7e}")
    # The same function in float32 (the CPU stands in for the spec dtype): same shapes, close values.
    outs32 = fn(*[x.float() for x in inputs])
    for o32, o in zip(outs32, outs):
        err = T.relative_error(o32, o)
        check(o32.dtype == torch.float32 and err < 1e-4, f"{name}: float32 run differs by {err}")
    if k.attention_patterns():
        check_sdpa(k, name, inputs, outs)


class _SdpaStandIn:
    """Where this PyTorch has no SDPA with `scale` (before 2.1), a stand-in with SDPA's documented meaning,
    softmax(q @ kᵀ · scale) @ v on 4-d [B, H, L, E] tensors, so that the transposes, broadcasting and reshapes
    around the call are checked all the same. `active` says whether it stands in."""

    def __enter__(self):
        import torch  # noqa: PLC0415
        F = torch.nn.functional
        self.real = getattr(F, "scaled_dot_product_attention", None)
        self.active = self.real is None or tuple(int(x) for x in re.findall(r"\d+", torch.__version__)[:2]) < (2, 1)
        if self.active:
            def fake_sdpa(q, kk, v, scale=None):
                assert q.dim() == kk.dim() == v.dim() == 4, "the fused kernels need 4-d inputs"
                assert kk.shape[-1] == q.shape[-1] and kk.shape[-2] == v.shape[-2], "k is [.., Lk, d]"
                return torch.softmax(q @ kk.transpose(-2, -1) * scale, dim=-1) @ v
            F.scaled_dot_product_attention = fake_sdpa
        return self

    def __exit__(self, *exc):
        import torch  # noqa: PLC0415
        if self.active:
            if self.real is None:
                del torch.nn.functional.scaled_dot_product_attention
            else:
                torch.nn.functional.scaled_dot_product_attention = self.real


def check_sdpa(k, name, inputs, outs) -> None:
    """The SDPA translation against the spec (under _SdpaStandIn)."""
    import torch  # noqa: PLC0415
    with _SdpaStandIn() as stand_in:
        for layout in T.SDPA_LAYOUTS:
            got = T.to_function(k, sdpa_layout=layout)(*inputs)
            for g, o in zip(got, outs):
                err = T.relative_error(g, o)
                check(err < 1e-10, f"{name}: SDPA ({layout}) differs from the spec by {err}")
    if stand_in.active:
        print(f"    (PyTorch {torch.__version__}: SDPA's layout checked with a stand-in for the SDPA call)")


def run_spec(text: str, *inputs):
    k = S.parse(text, "<test>")[0]
    return k, T.to_function(k)(*inputs)


def hand_checks() -> None:
    import torch  # noqa: PLC0415
    t = lambda *v: torch.tensor(v, dtype=torch.float64)  # noqa: E731

    x = torch.arange(12, dtype=torch.float64).reshape(2, 6)
    # reduce_sum to=3 over dim 1: element j sums j, j+3 → [[0+3, 1+4, 2+5], [6+9, 7+10, 8+11]]
    k, (s3, m2, s1, m0) = run_spec("""kernel r(X: f32[2,6]) {
      A = reduce_sum(X, dim=1, to=3)
      B = reduce_max(X, dim=-1, to=2)
      C = reduce_sum(X, dim=1)
      D = reduce_max(X, dim=0)
      return A, B, C, D }""", x)
    check(s3.tolist() == [[3, 5, 7], [15, 17, 19]], f"reduce_sum to=3: {s3.tolist()}")
    check(m2.tolist() == [[4, 5], [10, 11]], f"reduce_max to=2: {m2.tolist()}")
    check(s1.tolist() == [[15], [51]] and m0.tolist() == [[6, 7, 8, 9, 10, 11]], "reduce to=1 keeps the dim")
    check(k.types["B"] == ("f32", (2, 2)) and k.stmts[1].attrs["dim"] == 1, "dim=-1 normalised")

    # rms_norm: x * rsqrt(mean(x^2) + eps); row [3, 4]: mean 12.5
    _, (n, n2) = run_spec("""kernel n(X: f32[2,2]) {
      N = rms_norm(X, dim=1)
      M = rms_norm(X, dim=0, eps=0.5)
      return N, M }""", t([3.0, 4.0], [0.0, 1.0]))
    e = 1e-6
    want = [[3 / math.sqrt(12.5 + e), 4 / math.sqrt(12.5 + e)], [0.0, 1 / math.sqrt(0.5 + e)]]
    check(torch.allclose(n, torch.tensor(want, dtype=torch.float64), rtol=1e-14, atol=0), f"rms_norm {n}")
    want2 = [[3 / math.sqrt(4.5 + 0.5), 4 / math.sqrt(8.5 + 0.5)], [0.0, 1 / math.sqrt(8.5 + 0.5)]]
    check(torch.allclose(n2, torch.tensor(want2, dtype=torch.float64), rtol=1e-14, atol=0), f"rms_norm eps {n2}")

    # softmax over dim 0 and broadcasting [2,1] + [3] -> [2,3]; concat; scalars; unary ops
    k, (sm, bc, cc, sc) = run_spec("""kernel e(A: f32[2,1], B: f32[3]) {
      S = softmax(A, dim=0)
      C = add(A, B)
      D = concat(C, C, dim=0)
      P = mul_scalar(C, 0.5)
      Q = add_scalar(P, s=-1)
      return S, C, D, Q }""", t([0.0], [math.log(3)]), t(1.0, 2.0, 3.0))
    check(torch.allclose(sm, t([0.25], [0.75])), f"softmax {sm}")
    check(bc.tolist() == [[1, 2, 3], [1 + math.log(3), 2 + math.log(3), 3 + math.log(3)]], f"broadcast {bc}")
    check(tuple(cc.shape) == (4, 3) and k.types["D"][1] == (4, 3), "concat shape")
    check(torch.allclose(sc, bc * 0.5 - 1), "scalar ops")
    check(k.stmts[3].attrs == {"s": 0.5}, "positional scalar")

    xs = t(-2.0, -0.5, 0.0, 1.0, 3.0)
    _, outs = run_spec("""kernel u(X: f32[5]) {
      A = exp(X)
      B = square(X)
      C = silu(X)
      D = gelu(X)
      E = relu(X)
      F = sqrt(B)
      G = rsqrt(B)
      return A, B, C, D, E, F, G }""", xs)
    v = xs.tolist()
    want = [[math.exp(a) for a in v], [a * a for a in v], [a / (1 + math.exp(-a)) for a in v],
            [0.5 * a * (1 + math.erf(a / math.sqrt(2))) for a in v], [max(a, 0.0) for a in v],
            [abs(a) for a in v], [1 / abs(a) if a else math.inf for a in v]]
    for name, o, w in zip("ABCDEFG", outs, want):
        check(all(math.isclose(a, b, rel_tol=1e-14, abs_tol=1e-300) for a, b in zip(o.tolist(), w)),
              f"unary {name}: {o.tolist()} vs {w}")

    # matmul with a broadcast batch dim, and strides written in the spec
    k, (y,) = run_spec("""kernel m(X: f32[3,2,4], W: f32[4,5]{1,4}) {
      Y = matmul(X, W)
      return Y }""", torch.ones(3, 2, 4, dtype=torch.float64), torch.ones(4, 5, dtype=torch.float64))
    check(tuple(y.shape) == (3, 2, 5) and bool((y == 4).all()), "batched matmul")
    check(k.params[1].strides == (1, 4), "strides from the spec")

    # attention pattern: found for softmax over the last dim only, and not when S is also returned
    att = """kernel a(Q: f16[2,3,8], K: f16[2,8,5], V: f16[2,5,8]) {
      A = matmul(Q, K)
      S = softmax(A, dim=%s)
      O = matmul(S, V)
      return %s }"""
    check(len(S.parse(att % ("2", "O"))[0].attention_patterns()) == 1, "attention pattern found")
    check(len(S.parse(att % ("-1", "O"))[0].attention_patterns()) == 1, "attention pattern, dim=-1")
    check(not S.parse(att % ("1", "O"))[0].attention_patterns(), "softmax over dim 1 is no SDPA")
    check(not S.parse(att % ("2", "O, S"))[0].attention_patterns(), "S returned: no SDPA")
    scaled = """kernel a(Q: f16[2,3,8], K: f16[2,8,5], V: f16[2,5,8]) {
      A = matmul(Q, K)
      Z = mul_scalar(A, s=0.25)
      S = softmax(Z, dim=2)
      O = matmul(S, V)
      return %s }"""
    ks = S.parse(scaled % "O")[0]
    check(len(ks.attention_patterns()) == 1, "scaled attention pattern found")
    check(ks.attention_scale(ks.attention_patterns()[0]) == (0.25, ["A", "Z", "S"]), "its scale and statements")
    check(not S.parse(scaled % "O, Z")[0].attention_patterns(), "scaled logits returned: no SDPA")
    k = S.parse(att % ("2", "O"))[0]
    check(k.matmul_flops() == 2 * (2 * 3 * 5 * 8) + 2 * (2 * 3 * 8 * 5), f"flops {k.matmul_flops()}")
    check(k.bytes_once() == 2 * (48 + 80 + 80 + 48), f"bytes {k.bytes_once()}")

    # errors carry file:line:column and say what is wrong
    bad = {
        "kernel k(X: f16[4]) {\n  Y = softmx(X, dim=0)\n  return Y\n}": "<test>:2:7: unknown op 'softmx'",
        "kernel k(X: f16[4]) {\n  Y = softmax(X)\n  return Y\n}": "needs the attribute 'dim'",
        "kernel k(X: f16[4,2]) {\n  Y = matmul(X, X)\n  return Y\n}": "inner dimensions differ",
        "kernel k(X: f16[4]) {\n  Y = reduce_sum(X, dim=0, to=3)\n  return Y\n}": "to=3 does not divide",
        "kernel k(X: f16[4]) {\n  Y = exp(X, s=2)\n  return Y\n}": "has no attribute 's'",
        "kernel k(X: f16[4]) {\n  Y, Z = block(X) grid=[1,1,1] {\n  }\n  return Y\n}": "a block op: this is a μGraph",
        "kernel k(X: f17[4]) {\n  return X\n}": "<test>:1:13: unknown dtype 'f17'",
    }
    for text, want in bad.items():
        try:
            S.parse(text, "<test>")
            check(False, f"no error for {want!r}")
        except S.SpecError as e:
            check(want in str(e), f"error {str(e)!r} lacks {want!r}")


# ---- the run phase's Python on the CPU, with torch.cuda stubbed ----

class _StubCuda:
    """Just enough of torch.cuda for bench/run.py's protocol to run on the CPU: events read the host clock,
    streams and synchronisation do nothing, a graph capture runs its body once and replays as nothing (or
    fails, to take the fallback path)."""

    def __init__(self, capture_fails: bool):
        import contextlib  # noqa: PLC0415
        import time  # noqa: PLC0415
        stub = self

        class Event:
            def __init__(self, enable_timing=False):
                self.t = 0.0

            def record(self, stream=None):
                self.t = time.perf_counter()

            def synchronize(self):
                pass

            def elapsed_time(self, end):
                return (end.t - self.t) * 1000.0

        class Stream:
            cuda_stream = 0

            def __init__(self, device=None):
                pass

            def wait_stream(self, other):
                pass

        class CUDAGraph:
            def replay(self):
                stub.replays += 1

        @contextlib.contextmanager
        def graph(g):
            yield
            if capture_fails:
                raise RuntimeError("capture failed (stub)")

        self.replays = 0
        self.attrs = {"Event": Event, "Stream": Stream, "CUDAGraph": CUDAGraph, "graph": graph,
                      "stream": lambda s: contextlib.nullcontext(), "current_stream": lambda device=None: Stream(),
                      "synchronize": lambda device=None: None, "empty_cache": lambda: None,
                      "_sleep": lambda cycles: None}

    def __enter__(self):
        import torch  # noqa: PLC0415
        self.saved = {k: getattr(torch.cuda, k, None) for k in self.attrs}
        for k, v in self.attrs.items():
            setattr(torch.cuda, k, v)
        return self

    def __exit__(self, *exc):
        import torch  # noqa: PLC0415
        for k, v in self.saved.items():
            if v is None:
                delattr(torch.cuda, k)
            else:
                setattr(torch.cuda, k, v)


def dry_run(tmp: Path) -> None:
    """bench/run.py's bench_spec, summarise and markdown on the CPU for small specs (f16 made f32: PyTorch's CPU
    matmul has no f16 in old versions), without morgana bundles (they need a GPU) and without torch.compile."""
    import argparse  # noqa: PLC0415
    import torch  # noqa: PLC0415
    from . import report, run  # noqa: PLC0415
    specs = ["examples/lora.mg", "examples/ntrans.mg", "tests/gpu/specs/ragged_attention.mg",
             "tests/gpu/specs/ragged_norms.mg", "tests/gpu/specs/ragged_reduce.mg"]
    entries = []
    for rel in specs:
        name = Path(rel).stem
        (tmp / name).mkdir(parents=True, exist_ok=True)
        (tmp / name / "spec.mg").write_text((ROOT / rel).read_text().replace("f16", "f32"))
        entries.append({"name": name, "spec": f"{name}/spec.mg", "bundles": {}, "candidates": [], "errors": []})
    entries[0]["candidates"] = [{"rank": 1, "cost_us": 1.0}]  # not compiled: reported as such
    entries[0]["variants"] = [{"label": "var1", "source": "hand.mg", "cost_us": 2.0}]  # the same for a variant
    args = argparse.Namespace(seed=0, max_sets=3, reps=20, warmup=2, skip_compile=True, no_candidates=False,
                              verbose=True, compile_mode="max-autotune-no-cudagraphs", compile_runs=1)
    machine = {"gpu": "CPU stand-in", "l2_bytes": 1 << 20, "copy_bytes_per_s": 1e10,
               "peak_flops": {"f16": 1e12, "bf16": 1e12, "f32": 1e11}, "torch": torch.__version__}
    results = {"date": "2000-01-01", "commit": "test", "command": "python3 -m bench run (dry run)",
               "machine": machine, "options": vars(args), "specs": []}
    cpu = torch.device("cpu")
    for i, e in enumerate(entries):
        with _StubCuda(capture_fails=(i == 1)) as stub, _SdpaStandIn():
            row = run.bench_spec(torch, cpu, e, tmp, None, machine, args)
        res = row["results"]
        check(res["eager"]["status"] == "ok" and res["eager"]["error"] < 1e-5, f"{e['name']}: eager {res['eager']}")
        check(res["eager"]["graph"] == (i != 1), f"{e['name']}: graph fallback {res['eager']}")
        timed = sum(1 for r in res.values() if r.get("status") == "ok")
        check(stub.replays == (0 if i == 1 else (args.warmup + args.reps) * timed), f"{e['name']}: "
              f"{stub.replays} replays for {timed} timed")
        check(res["eager"].get("note") == "" and (i == 1) == bool(res["eager"].get("timing_note")),
              f"{e['name']}: notes {res['eager']}")
        check(row["sets"] >= 1 and row["summary"]["eager_us"] is not None, f"{e['name']}: {row['summary']}")
        if e["name"] == "ragged_attention":
            check(res["sdpa_view"]["status"] == "ok" and res["sdpa_contiguous"]["status"] == "ok",
                  f"sdpa: {res['sdpa_view']}")
            check(row["summary"]["sdpa_us"] is not None and row["summary"]["best_peer"] in ("eager", "sdpa"),
                  f"sdpa summary {row['summary']}")
        results["specs"].append(row)
    check(results["specs"][0]["candidates"][0]["status"] == "error", "a candidate without a bundle")
    check(results["specs"][0]["variants"][0]["status"] == "error", "a variant without a bundle")
    md = report.markdown(results)
    check("lora var1 (hand.mg, estimated 2.00 µs): error" in md, f"variant note:\n{md}")
    check(md.count("\n| ") == len(entries) and "| lora |" in md, f"table:\n{md}")
    text = report.results_file(results, md)
    check(text.startswith("# morgana benchmark, 2000-01-01, CPU stand-in, commit test"), "results file header")
    check(run.gpu_slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3", "gpu slug")
    print(md)


def main(argv=None) -> int:
    import argparse  # noqa: PLC0415
    ap = argparse.ArgumentParser(prog="python3 -m bench selftest", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--morgana", help="a morgana binary (default: build/morgana or build-test/morgana when present)")
    ap.add_argument("specs", nargs="*", help="spec files (default: examples/*.mg tests/gpu/specs/*.mg)")
    args = ap.parse_args(argv)
    morgana = args.morgana
    if morgana is None:
        for rel in ("build/morgana", "build-test/morgana"):
            if (ROOT / rel).exists():
                morgana = str(ROOT / rel)
                break
    specs = args.specs or sorted(glob.glob(str(ROOT / "examples" / "*.mg"))) + sorted(
        glob.glob(str(ROOT / "tests" / "gpu" / "specs" / "*.mg")))
    print("hand-computed checks", flush=True)
    hand_checks()
    print(f"specs (against {morgana or 'no morgana binary: shapes only'})", flush=True)
    for path in specs:
        check_spec_file(path, morgana, bool(args.specs))
    if not args.specs:
        import tempfile  # noqa: PLC0415
        print("the run phase's Python on the CPU (torch.cuda stubbed)", flush=True)
        with tempfile.TemporaryDirectory() as t:
            dry_run(Path(t))
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
