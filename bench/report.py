"""The benchmark's summary numbers and its markdown table (no PyTorch here, so it is testable anywhere)."""

from __future__ import annotations

import math
from typing import Dict, List, Optional

PEERS = ("eager", "compile", "sdpa")


def fmt_us(us: Optional[float]) -> str:
    if us is None or not math.isfinite(us):
        return "–"
    return f"{us:.1f}" if us >= 100 else f"{us:.2f}" if us >= 1 else f"{us:.3f}"


def describe(res: Dict) -> str:
    """One progress line for a measured candidate."""
    st = res.get("status")
    if st == "ok":
        extra = "" if res.get("graph", True) else f" [{res.get('timing_note')}]"
        return (f"ok   err {res['error']:.1e}  {fmt_us(res['us'])} us (min {fmt_us(res['us_min'])})  "
                f"{res.get('note', '')}{extra}  ({res.get('seconds', 0):.1f} s)")
    if st == "FAIL":
        return f"FAIL err {res['error']:.2e} > {res['tolerance']:.0e} (per set: " \
               f"{', '.join(f'{e:.2e}' for e in res['errors'])})"
    return f"error {res.get('message', '')}"


def _ok_us(res: Optional[Dict]) -> Optional[float]:
    return res["us"] if res and res.get("status") == "ok" else None


def summarise(row: Dict, machine: Dict) -> None:
    """Fills row["summary"]: the numbers of the table for one spec."""
    r = row["results"]
    s: Dict = {"morgana_us": _ok_us(r.get("morgana_best")), "plain_us": _ok_us(r.get("morgana_plain")),
               "eager_us": _ok_us(r.get("eager")), "compile_us": _ok_us(r.get("compile"))}
    sdpa = [(res["us"], key[len("sdpa_"):]) for key, res in r.items() if key.startswith("sdpa_") and _ok_us(res)]
    s["sdpa_us"], s["sdpa_layout"] = min(sdpa) if sdpa else (None, None)
    peers = [(s[f"{p}_us"], p) for p in PEERS if s[f"{p}_us"] is not None]
    s["best_peer_us"], s["best_peer"] = min(peers) if peers else (None, None)
    t = s["morgana_us"]
    s["ratio"] = t / s["best_peer_us"] if t and s["best_peer_us"] else None
    copy_bw = machine.get("copy_bytes_per_s")
    s["pct_copy_bw"] = 100.0 * row["bytes_once"] / (t * 1e-6) / copy_bw if t and copy_bw else None
    peak = machine.get("peak_flops", {}).get(row.get("dtype"))
    s["pct_peak"] = 100.0 * row["flops"] / (t * 1e-6) / peak if t and peak and row.get("flops") else None
    cands = sorted(row.get("candidates", []), key=lambda c: c["rank"])
    s["candidates_us"] = [_ok_us(c) for c in cands]
    chosen = next((c for c in cands if c["rank"] == 1), None)
    ok = sorted(us for us in s["candidates_us"] if us is not None)
    if chosen is None or _ok_us(chosen) is None:
        s["chosen_rank"] = None
    else:
        s["chosen_rank"] = 1 + sum(1 for us in ok if us < chosen["us"])
    s["candidates_ok"] = len(ok)
    row["summary"] = s


def _cell(row: Dict, key: str) -> str:
    res = row["results"].get(key)
    if res is None:
        return "–"
    if res.get("status") == "ok":
        runs = res.get("runs_us", [])
        spread = f" ({fmt_us(min(runs))}–{fmt_us(max(runs))}, {len(runs)} compilations)" if len(runs) > 1 else ""
        return fmt_us(res["us"]) + spread
    if res.get("status") == "FAIL":
        return f"FAIL ({res['error']:.1e})"
    return "error"


def _sdpa_cell(row: Dict) -> str:
    s = row.get("summary", {})
    keys = [k for k in row["results"] if k.startswith("sdpa_")]
    if not keys:
        return "–"
    if s.get("sdpa_us") is None:
        return " / ".join(_cell(row, k) for k in keys)
    return f"{fmt_us(s['sdpa_us'])} ({s['sdpa_layout']})"


def _candidates_cell(row: Dict) -> str:
    cands = sorted(row.get("candidates", []), key=lambda c: c["rank"])
    if not cands:
        return "–"
    parts = []
    for c in cands:
        if c.get("status") == "ok":
            parts.append(fmt_us(c["us"]))
        elif c.get("status") == "FAIL":
            parts.append("FAIL")
        else:
            parts.append("error")
    return ", ".join(parts)


def markdown(results: Dict) -> str:
    m = results["machine"]
    lines = [
        "| spec | morgana µs | spec as is µs | eager µs | compile µs | SDPA µs | morgana ÷ best peer | % copy BW "
        "| % tensor peak | top candidates µs (by estimated cost) | chosen's rank |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes: List[str] = []
    for row in results["specs"]:
        s = row.get("summary")
        if s is None:
            lines.append(f"| {row['name']} | error | | | | | | | | | |")
            notes.extend(f"{row['name']}: {e}" for e in row.get("errors", []))
            continue
        ratio = f"{s['ratio']:.2f} ({s['best_peer']})" if s["ratio"] else "–"
        bw = f"{s['pct_copy_bw']:.0f}%" if s["pct_copy_bw"] is not None else "–"
        pk = f"{s['pct_peak']:.0f}%" if s["pct_peak"] is not None else "–"
        rank = f"{s['chosen_rank']} of {s['candidates_ok']}" if s["chosen_rank"] else (
            "FAIL" if row.get("candidates") else "–")
        lines.append(f"| {row['name']} | {_cell(row, 'morgana_best')} | {_cell(row, 'morgana_plain')} | "
                     f"{_cell(row, 'eager')} | {_cell(row, 'compile')} | {_sdpa_cell(row)} | {ratio} | {bw} | {pk} | "
                     f"{_candidates_cell(row)} | {rank} |")
        if not row.get("exceeds_2x_l2", True):
            notes.append(f"{row['name']}: {row['sets']} input sets of {row['set_bytes']} bytes stay below 2x L2 "
                         f"(--max-sets)")
        for v in row.get("variants", []):
            us = _ok_us(v)
            notes.append(f"{row['name']} {v['label']} ({v.get('source')}, estimated {v.get('cost_us', 0):.2f} µs): "
                         + (f"{us:.2f} µs" if us is not None else v.get("status", "?")))
        for key, res in list(row["results"].items()) + [(f"candidate {c.get('rank')}", c)
                                                          for c in row.get("candidates", [])]:
            if res.get("status") == "error":
                notes.append(f"{row['name']} {key}: {res.get('message', '')}")
            elif res.get("status") == "ok" and not res.get("graph", True):
                notes.append(f"{row['name']} {key}: {res.get('timing_note')}")
        notes.extend(f"{row['name']}: {e}" for e in row.get("errors", []))
    peak = m.get("peak_flops", {})
    reps = results.get("options", {}).get("reps", "?")
    lines += [
        "",
        f"{m.get('gpu')}, torch {m.get('torch')} (CUDA {m.get('cuda')}); copy bandwidth "
        f"{m.get('copy_bytes_per_s', 0) / 1e9:.0f} GB/s (1 GiB device copy, read + write), matmul peak f16 "
        f"{peak.get('f16', 0) / 1e12:.0f} / bf16 {peak.get('bf16', 0) / 1e12:.0f} TFLOP/s (8192³), measured in this "
        f"run. Times: µs per op, median of {reps} CUDA-graph replays of one call per input set, input sets "
        f"rotated over more than 2x L2 ({m.get('l2_bytes', 0) >> 20} MiB); every variant checked against the "
        f"float64 reference on 3 input sets first (FAIL: relative error over tolerance, not timed). morgana: the "
        f"searched best bundle; spec as is: the spec compiled without search; compile: torch.compile "
        f"{results.get('options', {}).get('compile_mode', '')}; SDPA: scaled_dot_product_attention(scale=1) with "
        f"Kᵀ as a strided view or made contiguous first (the faster shown). Ratio < 1: morgana is faster. % copy "
        f"BW: inputs + outputs moved once / time / copy bandwidth; % tensor peak: 2·M·N·K of the matmuls / time / "
        f"peak of the dtype. chosen's rank: where the cost model's first candidate lands among the timed "
        f"candidates (1 = fastest).",
    ]
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def results_file(results: Dict, table: str) -> str:
    m = results["machine"]
    v = m.get("driver_version")
    driver = f"{v // 1000}.{v % 1000 // 10}" if isinstance(v, int) else "?"
    return (f"# morgana benchmark, {results['date']}, {m.get('gpu')}, commit {results['commit']}\n\n"
            f"- date: {results['date']}\n"
            f"- GPU: {m.get('gpu')} ({m.get('sms')} SMs, driver for CUDA {driver}); torch "
            f"{m.get('torch')}, CUDA {m.get('cuda')}\n"
            f"- commit: {results['commit']} (bundles by {results.get('morgana')} for target {results.get('target')})\n"
            f"- command: `{results['command']}`\n"
            f"- run time: {results.get('seconds', 0):.0f} s\n\n"
            f"{table}")
