"""`python3 -m bench prepare`: search and compile every spec into bundles, and write the manifest `run` reads.

For each spec (default examples/*.mg), in OUT/<spec name>/:
  spec.mg        a copy of the spec (the run phase builds its baselines from it)
  best.mg        `morgana optimize SPEC --target T -o best.mg --top N`: the searched best μGraph
  optimize.txt   optimize's report
  candN.mg       the N-th of the top verified candidates (1 = the best), one compilable program each
  *.mgb          `morgana compile` of best.mg, spec.mg ("plain": the spec compiled as written) and each candN.mg
and OUT/manifest.json lists them all.

Where the candidates come from: optimize writes only the best μGraph to -o, but a completed search stores its whole
result (every verified candidate's μGraph, cost and verification; docs/search.md, "Result files") in the search
cache, `$XDG_CACHE_HOME/morgana/KEY.result`. prepare points XDG_CACHE_HOME at a folder of its own per spec
(OUT/search-cache/<spec>), so the result file found there after the search is this search's, and reads the
candidates from it. A search cut short by the time limit is never cached: then only best.mg is there, and the
manifest says so. Re-running prepare answers from that cache instead of searching again.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from . import spec as S

ROOT = Path(__file__).resolve().parent.parent
MANIFEST_FORMAT = 1


# ---- search result files (search/result_io.cpp) ----

_BLOCK_FIELDS = {"spec", "mugraph", "cost"}  # "NAME BYTES\n" + BYTES + "\n"


def read_result(path: Path) -> Dict:
    """A search result file as a dict: target, made_by, options, stats, spec, candidates [{hash, cost_us,
    verification, mugraph, cost}]. Raises ValueError for anything that is not one."""
    data = path.read_bytes()
    pos, fields, candidates = 0, {}, []
    options, stats = {}, {}
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            raise ValueError(f"{path}: a last line without its newline")
        line = data[pos:end].decode("utf-8")
        pos = end + 1
        key, _, value = line.partition(" ")
        if key in _BLOCK_FIELDS and value.isdigit():
            n = int(value)
            if pos + n >= len(data) + 1 or data[pos + n: pos + n + 1] != b"\n":
                raise ValueError(f"{path}: the {n} bytes of '{key}' run past their end")
            value = data[pos: pos + n].decode("utf-8")
            pos += n + 1
        if key == "option":
            k, _, v = value.partition(" ")
            options[k] = v
        elif key == "stat":
            k, _, v = value.rpartition(" ")
            stats[k] = v
        elif key == "hash":
            candidates.append({"hash": value})
        elif key in ("cost_us", "verification", "mugraph", "cost") and candidates:
            candidates[-1][key] = float(value) if key == "cost_us" else value
        else:
            fields[key] = value
    if "morgana-search-result" not in fields:
        raise ValueError(f"{path}: not a morgana search result")
    return {"target": fields.get("target"), "made_by": fields.get("made-by"), "key": fields.get("key"),
            "options": options, "stats": stats, "spec": fields.get("spec", ""), "candidates": candidates}


def find_result(cache_home: Path, target: str, top: int, best_text: str) -> Optional[Dict]:
    """The result of the search that just wrote best.mg, from a search cache folder: for `target` and `top`, with
    best.mg's μGraph as its first candidate, the newest such (older morgana builds leave entries under other
    keys beside it). None when there is none."""
    found = []
    for p in (cache_home / "morgana").glob("*.result"):
        try:
            res = read_result(p)
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if res["target"] != target or res["options"].get("top") != str(top) or not res["candidates"]:
            continue
        if _program_text(res["candidates"][0].get("mugraph", "")) != best_text:
            continue
        res["path"] = p
        found.append((p.stat().st_mtime, str(p), res))
    return max(found)[2] if found else None


# ---- running morgana ----

def run(cmd: List[str], env=None, log: Optional[Path] = None) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if log is not None:
        log.write_text(f"$ {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r


def tail(text: str, lines: int = 6) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def git_commit() -> str:
    try:
        r = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
                           capture_output=True, text=True)
        return r.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def prepare_spec(args, spec_path: Path, out: Path) -> Dict:
    name = spec_path.stem
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    entry: Dict = {"name": name, "source": os.path.relpath(spec_path, ROOT), "spec": f"{name}/spec.mg",
                   "bundles": {}, "candidates": [], "errors": []}
    shutil.copyfile(spec_path, d / "spec.mg")
    try:
        k = S.parse_file(d / "spec.mg")
        entry["program"] = k.name
    except S.SpecError as e:  # morgana may still take it; the run phase will report what it cannot do
        entry["errors"].append(f"spec reader: {e}")
        entry["program"] = None
    morgana = args.morgana

    # Search, with a cache folder of this spec's own (see the module docstring).
    cache_home = out / "search-cache" / name
    cache_home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, XDG_CACHE_HOME=str(cache_home.resolve()))
    cmd = [morgana, "optimize", str(d / "spec.mg"), "--target", args.target, "-o", str(d / "best.mg"),
           "--top", str(args.top), "-q"]
    if args.time_limit is not None:
        cmd += ["--time-limit", str(args.time_limit)]
    if args.threads is not None:
        cmd += ["--threads", str(args.threads)]
    t0 = time.time()
    r = run(cmd, env=env, log=d / "optimize.txt")
    entry["search"] = {"seconds": round(time.time() - t0, 2), "command": " ".join(cmd[1:]),
                       "cached": "(from the cache" in r.stdout}
    print(f"  optimize: exit {r.returncode} in {entry['search']['seconds']} s", flush=True)
    jobs = [("plain", d / "spec.mg")]
    if r.returncode != 0 or not (d / "best.mg").exists():
        entry["errors"].append(f"optimize exited {r.returncode}: {tail(r.stderr or r.stdout)}")
    else:
        jobs.insert(0, ("best", d / "best.mg"))
        best_text = _program_text((d / "best.mg").read_text(encoding="utf-8"))
        res = find_result(cache_home, args.target, args.top, best_text)
        if res is None:
            entry["errors"].append("no search result file in the cache whose best is best.mg (a search the time "
                                   "limit cut short is not cached): no candidates besides best.mg")
        else:
            entry["search"].update({"result_file": os.path.relpath(res["path"], out), "made_by": res["made_by"],
                                    "stats": res["stats"]})
            for i, c in enumerate(res["candidates"], 1):
                f = d / f"cand{i}.mg"
                f.write_text(f"# candidate {i} of {len(res['candidates'])} from morgana optimize for {args.target}: "
                             f"estimated {c['cost_us']:.3f} us (hash {c['hash']}; {c['verification']})\n"
                             f"{c['mugraph']}", encoding="utf-8")
                entry["candidates"].append({"rank": i, "hash": c["hash"], "cost_us": c["cost_us"],
                                            "verification": c["verification"], "mugraph": f"{name}/cand{i}.mg",
                                            "same_as_best": _program_text(c["mugraph"]) == best_text})
                jobs.append((f"cand{i}", f))
    jobs += add_variants(args, name, d, entry)
    compile_bundles(morgana, args.target, d, jobs, entry)
    return entry


def add_variants(args, name: str, d: Path, entry: Dict) -> List:
    """--variants NAME=FILE: μGraph files of spec NAME written by hand (another grid, loop or tiling), proven
    equivalent to the spec (`morgana verify`), copied to d/varN.mg with the cost model's estimate, compiled and timed
    like the candidates: how the model's ranking is checked on forms the search did not keep."""
    jobs = []
    for i, src in enumerate(args.variant_files.get(name, []), 1):
        f = d / f"var{i}.mg"
        shutil.copyfile(src, f)
        r = run([args.morgana, "verify", str(d / "spec.mg"), str(f)])
        if r.returncode != 0:  # timed only what morgana proves equivalent to the spec, as the search's candidates
            entry["errors"].append(f"variant {src}: morgana verify exited {r.returncode}: {tail(r.stdout or r.stderr)}")
            continue
        r = run([args.morgana, "check", str(f), "--target", args.target])
        m = re.search(r"cost on \S+: ([0-9.]+) us", r.stdout)
        if r.returncode != 0 or m is None:
            entry["errors"].append(f"variant {src}: morgana check exited {r.returncode}: {tail(r.stderr or r.stdout)}")
            continue
        entry.setdefault("variants", []).append({"label": f"var{i}", "source": os.path.relpath(src, ROOT),
                                                 "mugraph": f"{name}/var{i}.mg", "cost_us": float(m.group(1))})
        jobs.append((f"var{i}", f))
    return jobs


def compile_bundles(morgana: str, target: str, d: Path, jobs, entry: Dict) -> None:
    """Compiles each (label, μGraph file) of `jobs` into d/<label>.mgb and records the bundle in the manifest entry
    (errors too)."""
    name = entry["name"]
    for label, src in jobs:
        dst = d / f"{label}.mgb"
        t0 = time.time()
        cr = run([morgana, "compile", str(src), "--target", target, "-o", str(dst), "-q"],
                 log=d / f"compile-{label}.txt")
        secs = round(time.time() - t0, 2)
        if cr.returncode == 0 and dst.exists():
            entry["bundles"][label] = f"{name}/{label}.mgb"
        else:
            entry["errors"].append(f"compile {label} exited {cr.returncode}: {tail(cr.stderr or cr.stdout)}")
        print(f"  compile {label}: exit {cr.returncode} in {secs} s", flush=True)
    for c in entry["candidates"]:
        c["bundle"] = entry["bundles"].get(f"cand{c['rank']}")
    for v in entry.get("variants", []):
        v["bundle"] = entry["bundles"].get(v["label"])


def recompile(args, out: Path, argv: List[str]) -> int:
    """--recompile: the μGraphs of an earlier prepare (its manifest) compiled again by this morgana, without
    searching: what a change to lowering or code generation needs before it is timed. The manifest keeps the
    search's commit and records the one the bundles now come from."""
    path = out / "manifest.json"
    if not path.exists():
        print(f"no {path}: run prepare without --recompile first", file=sys.stderr)
        return 1
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest.setdefault("search_commit", manifest.get("commit"))
    manifest["commit"] = git_commit()
    manifest["recompiled"] = {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python3 -m bench prepare " + " ".join(argv)}
    failed = 0
    for entry in manifest["specs"]:
        print(f"{entry['name']}:", flush=True)
        d = out / entry["name"]
        entry["bundles"], entry["errors"] = {}, []
        new_variants = []
        if entry["name"] in args.variant_files:  # --variants given again: they replace the earlier ones
            entry.pop("variants", None)
            new_variants = add_variants(args, entry["name"], d, entry)
        labels = ["best", "plain"] + [f"cand{c['rank']}" for c in entry["candidates"]]
        if not new_variants:
            labels += [v["label"] for v in entry.get("variants", [])]
        jobs = [(label, d / ("spec.mg" if label == "plain" else f"{label}.mg")) for label in labels] + new_variants
        jobs = [(label, src) for label, src in jobs if src.exists()]
        compile_bundles(args.morgana, manifest["target"], d, jobs, entry)
        failed += bool(entry["errors"])
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"wrote {path}: {len(manifest['specs'])} spec(s) recompiled, {failed} with errors", flush=True)
    return 1 if failed else 0


def _program_text(text: str) -> str:
    """A μGraph file without its comment lines and its kernel's `for [targets]` list (optimize writes the targets
    it searched for; the cached candidates have none): what two files must share to be the same program."""
    lines = (line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return re.sub(r"\) for \[[^\]]*\] \{", ") {", "\n".join(lines)).strip()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m bench prepare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--morgana", default="build/morgana", help="the morgana binary (default: build/morgana)")
    ap.add_argument("--target", default="h100", help="target file name, as `morgana targets` lists (default: h100)")
    ap.add_argument("--specs", nargs="+", help="spec files (default: examples/*.mg)")
    ap.add_argument("-o", "--out", required=True, help="output folder, e.g. bench/out/h100")
    ap.add_argument("--top", type=int, default=5, help="verified candidates to keep and compile (default: 5)")
    ap.add_argument("--time-limit", type=float, help="optimize's --time-limit per spec (default: morgana's)")
    ap.add_argument("--threads", type=int, help="optimize's --threads (default: morgana's, one per core)")
    ap.add_argument("--variants", nargs="+", default=[], metavar="NAME=FILE",
                    help="hand-written μGraphs of spec NAME, compiled and timed beside its candidates (varN)")
    ap.add_argument("--recompile", action="store_true",
                    help="no search: compile the μGraphs an earlier prepare left in OUT again (after a change to "
                         "lowering or code generation); --variants given with it replace a spec's earlier ones")
    args = ap.parse_args(argv)
    if not Path(args.morgana).exists() and not shutil.which(args.morgana):
        print(f"no morgana binary at {args.morgana} (build it, or pass --morgana)", file=sys.stderr)
        return 1
    args.variant_files = {}
    for v in args.variants:
        name, sep, file = v.partition("=")
        if not sep or not Path(file).is_file():
            print(f"--variants {v}: expected NAME=FILE with an existing μGraph file", file=sys.stderr)
            return 1
        args.variant_files.setdefault(name, []).append(Path(file))
    if args.recompile:
        return recompile(args, Path(args.out), argv if argv is not None else sys.argv[1:])
    specs = [Path(p) for p in (args.specs or sorted(glob.glob(str(ROOT / "examples" / "*.mg"))))]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    version = run([args.morgana, "--version"]).stdout.strip()
    manifest = {"format": MANIFEST_FORMAT, "target": args.target, "morgana": version, "commit": git_commit(),
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "command": "python3 -m bench prepare " + " ".join(argv if argv is not None else sys.argv[1:]),
                "top": args.top, "specs": []}
    t_all = time.time()
    failed = 0
    for path in specs:
        print(f"{path.stem}:", flush=True)
        entry = prepare_spec(args, path, out)
        failed += bool(entry["errors"])
        for e in entry["errors"]:
            print(f"  error: {e}", flush=True)
        manifest["specs"].append(entry)
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"wrote {out / 'manifest.json'}: {len(specs)} spec(s) in {time.time() - t_all:.0f} s, "
          f"{failed} with errors", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
