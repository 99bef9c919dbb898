"""`python3 -m bench run OUT`: check and time `prepare`'s bundles and the PyTorch baselines on this machine's GPU.

One process, one protocol for morgana and every baseline (bench/README.md says why each step is there):
  1. correctness: on 3 fresh random input sets (normal, std 1, in the spec's dtype), the outputs (morgana's output
     buffers poisoned with NaN before the launch) against the float64 reference built from the spec, by
     ||out - ref|| / ||ref||, within the dtype's tolerance (NaN never passes). A failing variant is reported as
     FAIL and not timed.
  2. timing: as many input sets as make their bytes exceed 2x the L2 cache, each with its own outputs; one CUDA
     graph captures one pass (one call per set) on the capture stream; warm-up replays, then at least 20 timed
     replays (CUDA events around each); time per op = replay time / sets; the median is reported, and the min.
  3. the machine: device-to-device copy bandwidth (1 GiB copies, bytes read + written) and the fp16 and bf16
     tensor peak (8192^3 torch.matmul), medians, measured in the same run.
Baselines come from the spec text (bench/spec.py, bench/torch_spec.py): PyTorch eager in the spec's dtype,
torch.compile of the same function, and scaled_dot_product_attention where the spec's pattern is matmul ->
softmax(last dim) -> matmul.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
import warnings
import traceback
from pathlib import Path
from typing import Dict, List, Optional

from . import report
from . import spec as S
from . import torch_spec as T

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

from morgana import runtime  # noqa: E402  (the one binding of libmorgana_runtime.so)

CHECK_SETS = 3


def log(msg: str) -> None:
    print(msg, flush=True)


# ---- timing ----

def time_passes(torch, device, run_set, n_sets: int, reps: int, warmup: int) -> Dict:
    """Times one pass (run_set(i) for every set i) as a CUDA graph replay; microseconds per op (per set).
    `run_set` queues its work on torch's current stream and returns what it allocated (kept alive, so every set
    writes its own buffers as it would outside the graph). Falls back to timing plain passes when the capture
    fails, and says so."""
    cur = torch.cuda.current_stream(device)
    # Warm up outside the capture on a side stream, as torch.cuda.graphs asks (lazy init, autotuning, allocator).
    side = torch.cuda.Stream(device)
    side.wait_stream(cur)
    with torch.cuda.stream(side):
        for i in range(n_sets):
            run_set(i)
    cur.wait_stream(side)
    torch.cuda.synchronize(device)

    graph, keep, note = torch.cuda.CUDAGraph(), [], None
    try:
        with torch.cuda.graph(graph):
            for i in range(n_sets):
                keep.append(run_set(i))
        replay = graph.replay
    except Exception as e:  # noqa: BLE001 (reported, and timed another way)
        torch.cuda.synchronize(device)
        graph, keep = None, []
        note = f"CUDA graph capture failed ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); " \
               f"timed plain passes"

        def replay():
            for i in range(n_sets):
                run_set(i)
    for _ in range(warmup):
        replay()
    torch.cuda.synchronize(device)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(20_000_000)  # keep the GPU busy while the replays are queued: no host gaps in the timings
    for s, e in zip(starts, ends):
        s.record(cur)
        replay()
        e.record(cur)
    torch.cuda.synchronize(device)
    per_op = sorted(s.elapsed_time(e) * 1000.0 / n_sets for s, e in zip(starts, ends))
    del graph, keep
    return {"us": statistics.median(per_op), "us_min": per_op[0], "replays": reps, "graph": note is None,
            "timing_note": note}


def copy_bandwidth(torch, device, reps: int = 10) -> float:
    """Bytes per second of a 1 GiB device-to-device copy, counting bytes read plus bytes written; median."""
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device=device).fill_(7)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        dst.copy_(src)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1000.0)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n / statistics.median(times)


def matmul_peak(torch, device, dtype, n: int = 8192, reps: int = 10) -> float:
    """FLOP/s of an n^3 torch.matmul (2n^3 FLOPs); median."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    c = torch.empty(n, n, device=device, dtype=dtype)
    for _ in range(3):
        torch.matmul(a, b, out=c)
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.matmul(a, b, out=c)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1000.0)
    del a, b, c
    torch.cuda.empty_cache()
    return 2 * n ** 3 / statistics.median(times)


# ---- what is measured ----

class TorchCandidate:
    """A baseline: a function of the inputs returning a tuple of outputs."""

    def __init__(self, label: str, fn, note: str = ""):
        self.label, self.fn, self.note = label, fn, note

    def call(self, inputs, outs=None):
        return list(self.fn(*inputs))

    def close(self):
        pass


class MorganaCandidate:
    """A program of a bundle, launched through the Python binding on torch's current stream."""

    def __init__(self, label: str, path: Path, kernel: S.Kernel, device, lib):
        self.label = label
        self.bundle = runtime.Bundle(path, library=lib)
        try:
            names = self.bundle.program_names
            name = kernel.name if kernel.name in names else names[0]
            self.program = self.bundle.select(name, device=device)
            self.variant = self.program.prepare(device=device)  # loaded now, never inside a capture
            info = self.program.info
            if (info.num_inputs, info.num_outputs) != (len(kernel.params), len(kernel.outputs)):
                raise ValueError(f"{path.name}: program '{name}' has {info.num_inputs} inputs and "
                                 f"{info.num_outputs} outputs, the spec {len(kernel.params)} and "
                                 f"{len(kernel.outputs)}")
        except BaseException:
            self.bundle.close()
            raise
        self.note = f"{self.variant}, {info.num_kernels} kernel(s)"
        self.device = device

    def new_outputs(self, torch):
        dt = {runtime.DType.F16: torch.float16, runtime.DType.BF16: torch.bfloat16, runtime.DType.F32: torch.float32}
        return [torch.empty_strided(p.shape, p.strides, dtype=dt[p.dtype], device=self.device)
                for p in self.program.outputs]

    def call(self, inputs, outs=None):
        import torch  # noqa: PLC0415
        if outs is None:
            outs = self.new_outputs(torch)
            for o in outs:
                o.fill_(float("nan"))  # poison: an element the program does not write fails the check
        self.program(*inputs, out=outs)
        return outs

    def close(self):
        self.bundle.close()


def measure(torch, device, cand, check_sets, refs, tol, timing_sets, args) -> Dict:
    """The protocol for one candidate: correctness on the check sets, then timing if it passed."""
    res: Dict = {"label": cand.label, "note": cand.note}
    errs = []
    for inputs, ref in zip(check_sets, refs):
        outs = cand.call(inputs)
        torch.cuda.synchronize(device)
        if len(outs) != len(ref):
            errs.append(float("inf"))
            continue
        errs.append(max(T.relative_error(o, r) for o, r in zip(outs, ref)))
    res["error"] = max(errs)
    res["errors"] = errs
    res["tolerance"] = tol
    if not all(e <= tol for e in errs):  # NaN and inf fail here too
        res["status"] = "FAIL"
        return res
    timing_outs = [None] * len(timing_sets)
    if isinstance(cand, MorganaCandidate):
        timing_outs = [cand.new_outputs(torch) for _ in timing_sets]

    def run_set(i):
        return cand.call(timing_sets[i], timing_outs[i])

    res.update(time_passes(torch, device, run_set, len(timing_sets), args.reps, args.warmup))
    res["status"] = "ok"
    return res


def bench_spec(torch, device, entry: Dict, out_dir: Path, lib, machine: Dict, args) -> Dict:
    kernel = S.parse_file(out_dir / entry["spec"])
    tol = T.TOLERANCE[kernel.dtype]
    row: Dict = {"name": entry["name"], "program": kernel.name, "dtype": kernel.dtype,
                 "bytes_once": kernel.bytes_once(), "flops": kernel.matmul_flops(), "results": {},
                 "candidates": [], "errors": list(entry.get("errors", []))}
    gen = torch.Generator(device=device)
    gen.manual_seed(args.seed)
    check_sets = [T.random_inputs(kernel, device, gen) for _ in range(CHECK_SETS)]
    ref_fn = T.to_function(kernel)
    refs = [[r.to(torch.float64) for r in ref_fn(*[x.to(torch.float64) for x in inputs])] for inputs in check_sets]
    set_bytes = sum(p.nbytes for p in kernel.params)
    n_sets = min(args.max_sets, 2 * machine["l2_bytes"] // max(set_bytes, 1) + 1)
    timing_sets = [T.random_inputs(kernel, device, gen) for _ in range(n_sets)]
    row["sets"] = n_sets
    row["set_bytes"] = set_bytes
    row["exceeds_2x_l2"] = n_sets * set_bytes > 2 * machine["l2_bytes"]
    torch.cuda.synchronize(device)

    def run_one(key: str, make):
        t0 = time.time()
        cand = None
        try:
            cand = make()
            res = measure(torch, device, cand, check_sets, refs, tol, timing_sets, args)
        except Exception as e:  # noqa: BLE001 (one candidate's failure is reported, the run goes on)
            res = {"label": key, "status": "error", "message": f"{type(e).__name__}: {e}".strip()}
            if args.verbose:
                traceback.print_exc()
        finally:
            if cand is not None:
                cand.close()
        res["seconds"] = round(time.time() - t0, 2)
        log(f"  {key:14s} " + report.describe(res))
        return res

    bundles = entry.get("bundles", {})
    for key in ("best", "plain"):
        if key in bundles:
            row["results"][f"morgana_{key}"] = run_one(
                f"morgana {key}", lambda k=key: MorganaCandidate(k, out_dir / bundles[k], kernel, device, lib))
    eager = T.to_function(kernel)
    row["results"]["eager"] = run_one("eager", lambda: TorchCandidate("eager", eager))
    if not args.skip_compile:
        quiet_inductor(torch)

        def make_compiled():
            torch._dynamo.reset()  # every spec's function shares one code object: start from an empty cache
            return TorchCandidate("compile", torch.compile(eager, mode=args.compile_mode, dynamic=False,
                                                           fullgraph=True), args.compile_mode)
        # torch.compile's autotuner picks differently from one compilation to the next (the same spec measured
        # 3.1 to 12.4 us in one day's runs on the H100): with --compile-runs N the peer is its fastest of N
        # compilations, each after the first autotuning afresh (inductor's caches off), the others reported.
        runs = []
        for i in range(max(1, args.compile_runs)):
            if i == 1:
                inductor_caches(torch, False)
            runs.append(run_one(f"torch.compile {i + 1}", make_compiled))
        if len(runs) > 1:
            inductor_caches(torch, True)
        ok = [r for r in runs if r.get("status") == "ok"]
        best = min(ok, key=lambda r: r["us"]) if ok else runs[0]
        best["runs_us"] = [r["us"] for r in ok]
        row["results"]["compile"] = best
    if kernel.attention_patterns():
        for layout in T.SDPA_LAYOUTS:
            row["results"][f"sdpa_{layout}"] = run_one(
                f"sdpa ({layout})", lambda lay=layout: TorchCandidate(
                    f"sdpa_{lay}", T.to_function(kernel, sdpa_layout=lay), f"K^T {lay}"))
    if not args.no_candidates:
        for c in entry.get("candidates", []):
            if not c.get("bundle"):
                row["candidates"].append({"rank": c["rank"], "status": "error", "message": "not compiled",
                                          "cost_us": c.get("cost_us")})
                continue
            res = run_one(f"candidate {c['rank']}", lambda c=c: MorganaCandidate(
                f"cand{c['rank']}", out_dir / c["bundle"], kernel, device, lib))
            res.update({"rank": c["rank"], "cost_us": c.get("cost_us"), "same_as_best": c.get("same_as_best")})
            row["candidates"].append(res)
        for v in entry.get("variants", []):
            if not v.get("bundle"):
                row.setdefault("variants", []).append({"label": v["label"], "status": "error", "message": "not compiled",
                                                       "cost_us": v.get("cost_us"), "source": v.get("source")})
                continue
            res = run_one(f"variant {v['label']}", lambda v=v: MorganaCandidate(
                v["label"], out_dir / v["bundle"], kernel, device, lib))
            res.update({"cost_us": v.get("cost_us"), "source": v.get("source")})
            row.setdefault("variants", []).append(res)
    del check_sets, timing_sets, refs
    torch.cuda.empty_cache()
    report.summarise(row, machine)
    return row


# ---- the command ----

def quiet_inductor(torch) -> None:
    """max-autotune prints a table of every autotuning choice; the table that matters here is ours."""
    try:
        import torch._inductor.config as cfg  # noqa: PLC0415
    except ImportError:
        return
    for name, value in (("autotune_num_choices_displayed", 0), ("max_autotune_report_choices_stats", False)):
        if hasattr(cfg, name):
            setattr(cfg, name, value)


def inductor_caches(torch, on: bool) -> None:
    """Inductor's caches (compiled graphs, autotuning results) on or off: off, a compilation autotunes afresh."""
    try:
        import torch._inductor.config as cfg  # noqa: PLC0415
    except ImportError:
        return
    if hasattr(cfg, "force_disable_caches"):
        cfg.force_disable_caches = not on
    # dynamo says, every compilation, that its profile-guided cache is off too: known, and not this table's business.
    warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")


def gpu_slug(name: str) -> str:
    s = re.sub(r"^nvidia\s+", "", name.strip(), flags=re.I).lower()
    return re.sub(r"[^a-z0-9]+", "-", s).strip("-") or "gpu"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m bench run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="prepare's output folder (holding manifest.json), e.g. bench/out/h100")
    ap.add_argument("--morgana-lib", help="libmorgana_runtime.so (default: morgana.runtime's search: "
                                          "MORGANA_RUNTIME_LIB, build/runtime/, gpu-pack/lib/, the loader path)")
    ap.add_argument("--json", help="write the results here (default: DIR/results.json)")
    ap.add_argument("--results-dir", help="also write the table as YYYY-MM-DD-<gpu>-<commit>.md there "
                                          "(e.g. bench/results)")
    ap.add_argument("--specs", nargs="+", help="only these specs (names or shell patterns, e.g. gqa_* lora)")
    ap.add_argument("--skip-compile", "--no-compile", dest="skip_compile", action="store_true",
                    help="leave out torch.compile (it takes ~20 s per spec)")
    ap.add_argument("--compile-runs", type=int, default=1,
                    help="compilations of each spec by torch.compile, each autotuned afresh and timed; the fastest "
                         "is the peer (default 1; 3 settles comparisons within its run-to-run spread)")
    ap.add_argument("--compile-mode", default="max-autotune-no-cudagraphs", help="torch.compile mode (default: "
                                                                                 "max-autotune-no-cudagraphs)")
    ap.add_argument("--no-candidates", action="store_true", help="time only the best and the plain bundle")
    ap.add_argument("--reps", type=int, default=30, help="timed graph replays (default 30, at least 20)")
    ap.add_argument("--warmup", type=int, default=3, help="graph replays before timing (default 3)")
    ap.add_argument("--max-sets", type=int, default=4096, help="most input sets per pass (default 4096)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    ap.add_argument("--commit", help="commit named in the results file (default: the manifest's)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print tracebacks of failures")
    args = ap.parse_args(argv)
    if args.reps < 20:
        ap.error("--reps must be at least 20")
    command = "python3 -m bench run " + shlex.join(argv if argv is not None else sys.argv[1:])
    out_dir = Path(args.dir)
    manifest = json.loads((out_dir / "manifest.json").read_text())
    entries = manifest["specs"]
    if args.specs:
        entries = [e for e in entries if any(fnmatch.fnmatch(e["name"], p) or Path(p).stem == e["name"]
                                             for p in args.specs)]
        if not entries:
            log(f"no spec of the manifest matches {args.specs}")
            return 1

    import torch  # noqa: PLC0415
    if not torch.cuda.is_available():
        log("no CUDA GPU visible to PyTorch")
        return 1
    t_start = time.time()
    device = torch.device("cuda", torch.cuda.current_device())
    torch.cuda.set_device(device)
    runtime.use_torch_device(device)
    lib = runtime.load(args.morgana_lib)
    props = torch.cuda.get_device_properties(device)
    l2 = getattr(props, "L2_cache_size", 0) or 0
    machine: Dict = {
        "gpu": props.name, "sms": props.multi_processor_count, "memory_bytes": props.total_memory,
        "l2_bytes": l2 or 50 << 20, "l2_reported": bool(l2), "torch": torch.__version__,
        "cuda": torch.version.cuda, "runtime_lib": lib.path, "python": platform.python_version(),
        "host": platform.node(),
    }
    try:
        d = runtime.describe_device(-1, library=lib)
        machine.update({"arch": d.arch, "driver_version": d.driver_version})
    except runtime.MorganaError as e:
        machine["runtime_error"] = str(e)
    log(f"{props.name}: {props.multi_processor_count} SMs, L2 {machine['l2_bytes'] >> 20} MiB, torch "
        f"{torch.__version__} (CUDA {torch.version.cuda}), runtime {lib.path}")
    machine["copy_bytes_per_s"] = copy_bandwidth(torch, device)
    machine["peak_flops"] = {"f16": matmul_peak(torch, device, torch.float16),
                             "bf16": matmul_peak(torch, device, torch.bfloat16)}
    log(f"copy bandwidth {machine['copy_bytes_per_s'] / 1e9:.0f} GB/s (read + write), matmul peak "
        f"f16 {machine['peak_flops']['f16'] / 1e12:.0f} TFLOP/s, bf16 {machine['peak_flops']['bf16'] / 1e12:.0f} "
        f"TFLOP/s ({time.time() - t_start:.0f} s)")

    results = {"format": 1, "command": command, "date": datetime.date.today().isoformat(),
               "commit": args.commit or manifest.get("commit", "unknown"), "target": manifest.get("target"),
               "morgana": manifest.get("morgana"), "machine": machine, "options": vars(args), "specs": []}
    json_path = Path(args.json) if args.json else out_dir / "results.json"
    for entry in entries:
        log(f"{entry['name']} ({time.time() - t_start:.0f} s):")
        try:
            row = bench_spec(torch, device, entry, out_dir, lib, machine, args)
        except Exception as e:  # noqa: BLE001
            if args.verbose:
                traceback.print_exc()
            row = {"name": entry["name"], "results": {}, "candidates": [],
                   "errors": [f"{type(e).__name__}: {e}"]}
            log(f"  error: {row['errors'][0]}")
        results["specs"].append(row)
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(results, indent=2, default=str) + "\n")  # after every spec
    results["seconds"] = round(time.time() - t_start, 1)
    json_path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    md = report.markdown(results)
    if args.results_dir:
        rd = Path(args.results_dir)
        rd.mkdir(parents=True, exist_ok=True)
        name = f"{results['date']}-{gpu_slug(props.name)}-{results['commit']}.md"
        (rd / name).write_text(report.results_file(results, md))
        log(f"wrote {rd / name}")
    log(f"wrote {json_path} ({results['seconds']:.0f} s)\n")
    print(md, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
