"""A parsed spec (bench/spec.py) as PyTorch code: the benchmark's reference and baselines.

`to_function(kernel)` returns a plain Python function of the kernel's inputs that runs each statement as the
PyTorch op(s) docs/spec-language.md defines it by, and returns the outputs as a tuple. The same function serves
  - the float64 reference (called on inputs upcast to float64),
  - the PyTorch eager baseline (called on the inputs in the spec's dtype),
  - torch.compile's input (it is traceable: only torch ops, no data-dependent Python),
and `to_function(kernel, sdpa=...)` replaces each attention pattern (kernel.attention_patterns()) by one
torch.nn.functional.scaled_dot_product_attention call with the spec's scale (1.0 unless a mul_scalar scales the
logits between the matmul and the softmax).

Meaning of each op (docs/spec-language.md, "Ops"):
  matmul            torch.matmul: [..., m, k] x [..., k, n], batch dims broadcast like numpy (both ranks >= 2)
  exp sqrt rsqrt square relu   the torch function of the same name
  silu              x * sigmoid(x) (F.silu);  gelu: the erf form (F.gelu, approximate="none")
  mul_scalar/add_scalar   x * s / x + s
  add sub mul div   elementwise, numpy broadcasting
  reduce_sum/max    over `dim`, keeping it, to `to` groups: element j sums (or maxes) j, j+to, j+2·to, ... — the
                    dim viewed as [n/to, to], reduced over the first part
  rms_norm          x * rsqrt(mean(x², dim) + eps), eps default 1e-6
  softmax           torch.softmax(x, dim)
  concat            torch.cat([a, b], dim)
  transpose         x.transpose(-2, -1) (a view, like the spec's)
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from .spec import BINARY, Kernel, Stmt

SDPA_LAYOUTS = ("view", "contiguous")


def _torch():
    import torch  # noqa: PLC0415 (the parser and the CLI's help work without PyTorch)
    return torch


def torch_dtype(name: str):
    torch = _torch()
    return {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[name]


def _reduce(torch, x, dim: int, to: int, op: str):
    n = x.shape[dim]
    grouped = x.reshape(*x.shape[:dim], n // to, to, *x.shape[dim + 1:])
    return grouped.sum(dim=dim) if op == "reduce_sum" else grouped.amax(dim=dim)


def _apply(torch, s: Stmt, a, b=None):
    F = torch.nn.functional
    op, at = s.op, s.attrs
    if op == "matmul":
        return torch.matmul(a, b)
    if op == "exp":
        return torch.exp(a)
    if op == "sqrt":
        return torch.sqrt(a)
    if op == "rsqrt":
        return torch.rsqrt(a)
    if op == "square":
        return a * a
    if op == "silu":
        return F.silu(a)
    if op == "gelu":
        return F.gelu(a)  # the erf form
    if op == "relu":
        return torch.relu(a)
    if op == "mul_scalar":
        return a * at["s"]
    if op == "add_scalar":
        return a + at["s"]
    if op in BINARY:
        return {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[op](a, b)
    if op in ("reduce_sum", "reduce_max"):
        return _reduce(torch, a, at["dim"], at.get("to", 1), op)
    if op == "rms_norm":
        return a * torch.rsqrt(torch.mean(a * a, dim=at["dim"], keepdim=True) + at["eps"])
    if op == "softmax":
        return torch.softmax(a, dim=at["dim"])
    if op == "concat":
        return torch.cat([a, b], dim=at["dim"])
    if op == "transpose":
        return a.transpose(-2, -1)
    raise ValueError(f"{s.line}:{s.col}: no PyTorch translation of op '{op}'")


def sdpa(q, k, v, layout: str = "contiguous", scale: float = 1.0):
    """softmax(scale * q @ k) @ v through F.scaled_dot_product_attention with that scale, for q [..., Lq, d],
    k [..., d, Lk] (the spec's layout) and v [..., Lk, dv], batch dims broadcast. SDPA wants k as [..., Lk, d]:
    layout "view" passes the transposed view (its last dim has stride Lk, which the fused flash and
    memory-efficient kernels refuse, so SDPA falls back to a slower one), "contiguous" copies it first (part of
    the measured time) so that the fused kernels can run. Batch dims are folded into the 4-d [B, H, L, E] form
    the fused kernels need."""
    torch = _torch()
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    kt = k.transpose(-2, -1)
    if layout == "contiguous":
        kt = kt.contiguous()
    elif layout != "view":
        raise ValueError(f"unknown SDPA layout {layout!r}")
    q, kt, v = (t.expand(*batch, *t.shape[-2:]) for t in (q, kt, v))

    def four_d(t):
        if t.dim() < 4:
            return t.reshape(*(1,) * (4 - t.dim()), *t.shape)
        return t.reshape(-1, *t.shape[-3:]) if t.dim() > 4 else t

    out = torch.nn.functional.scaled_dot_product_attention(four_d(q), four_d(kt), four_d(v), scale=scale)
    return out.reshape(*batch, out.shape[-2], out.shape[-1])


def to_function(kernel: Kernel, sdpa_layout: Optional[str] = None) -> Callable:
    """The kernel as a function of its inputs (tensors, in parameter order) returning a tuple of its outputs. With
    `sdpa_layout`, every attention pattern goes through sdpa() with that layout (ValueError if there is none)."""
    replaced: Dict[str, Tuple[str, str, str, float]] = {}  # O -> (Q, K, V, scale) of a pattern
    skipped = set()
    if sdpa_layout is not None:
        patterns = kernel.attention_patterns()
        if not patterns:
            raise ValueError(f"kernel {kernel.name} has no matmul -> softmax(last dim) -> matmul to give SDPA")
        for a, s, o in patterns:
            scale, defined = kernel.attention_scale((a, s, o))
            replaced[o.out] = (a.args[0], a.args[1], o.args[1], scale)
            skipped.update(defined)
    stmts = list(kernel.stmts)
    names = [p.name for p in kernel.params]
    outputs = list(kernel.outputs)

    def run(*inputs):
        torch = _torch()
        if len(inputs) != len(names):
            raise TypeError(f"{kernel.name} takes {len(names)} inputs, got {len(inputs)}")
        env = dict(zip(names, inputs))
        for st in stmts:
            if st.out in skipped:
                continue
            if st.out in replaced:
                q, k, v, scale = replaced[st.out]
                env[st.out] = sdpa(env[q], env[k], env[v], sdpa_layout, scale)
                continue
            env[st.out] = _apply(torch, st, *[env[a] for a in st.args])
        return tuple(env[o] for o in outputs)

    run.__name__ = f"spec_{kernel.name}" + (f"_sdpa_{sdpa_layout}" if sdpa_layout else "")
    return run


def random_inputs(kernel: Kernel, device, generator=None, dtype=None) -> List:
    """One input set: each parameter with its declared shape and strides, normal (mean 0, std 1) in the spec's
    dtype (or `dtype`); an element that rounds to exactly 0 becomes 0.5 (no input is ever zero)."""
    torch = _torch()
    out = []
    for p in kernel.params:
        dt = dtype or torch_dtype(p.dtype)
        t = torch.empty_strided(p.shape, p.strides, dtype=dt, device=device)
        t.normal_(0.0, 1.0, generator=generator)
        t.masked_fill_(t == 0, 0.5)
        out.append(t)
    return out


def relative_error(out, ref) -> float:
    """||out - ref|| / ||ref|| in float64 (inf when `out` has a NaN or an infinity, or the shapes differ)."""
    torch = _torch()
    if tuple(out.shape) != tuple(ref.shape):
        return float("inf")
    o = out.to(torch.float64)
    if not bool(torch.isfinite(o).all()):
        return float("inf")
    r = ref.to(device=o.device, dtype=torch.float64)
    denom = float(torch.linalg.vector_norm(r))
    num = float(torch.linalg.vector_norm(o - r))
    return num / denom if denom > 0 else (0.0 if num == 0 else float("inf"))


# ||out - ref|| / ||ref|| a result in the spec's dtype may have and pass.
TOLERANCE = {"f16": 1e-2, "bf16": 3e-2, "f32": 1e-3}
