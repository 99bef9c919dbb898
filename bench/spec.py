"""A reader of morgana's spec language (docs/spec-language.md), kernel level only, for the benchmark's baselines.

The benchmark derives every baseline from the spec itself, so it needs the spec as data: the kernel's parameters
(name, dtype, shape, strides), its statements (`X = op(args, key=value)`) and its outputs. This module parses that
text, checks each op against the rules of the spec language (operand count, attributes, defaults) and infers every
value's shape, so that a wrong or unsupported spec fails here with file:line:column rather than deep inside
PyTorch. Block ops (μGraphs) are refused: a baseline is built from what the user asked for, not from how morgana
computes it.

It knows no PyTorch; bench/torch_spec.py turns a parsed kernel into PyTorch code.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

DTYPES = {"f16": 2, "bf16": 2, "f32": 4}  # name -> bytes per element

UNARY = {"exp", "sqrt", "rsqrt", "square", "silu", "gelu", "relu"}
SCALAR = {"mul_scalar", "add_scalar"}  # unary with the scalar attribute s (required)
BINARY = {"add", "sub", "mul", "div"}
REDUCE = {"reduce_sum", "reduce_max"}
# op -> (operand count, accepted attributes, required attributes)
OPS: Dict[str, Tuple[int, Tuple[str, ...], Tuple[str, ...]]] = {
    **{op: (1, (), ()) for op in UNARY},
    **{op: (1, ("s",), ("s",)) for op in SCALAR},
    **{op: (2, (), ()) for op in BINARY},
    **{op: (1, ("dim", "to"), ("dim",)) for op in REDUCE},
    "matmul": (2, (), ()),
    "rms_norm": (1, ("dim", "eps"), ("dim",)),
    "softmax": (1, ("dim",), ("dim",)),
    "concat": (2, ("dim",), ("dim",)),
    "transpose": (1, (), ()),
}
RMS_NORM_EPS = 1e-06  # the spec language's default


class SpecError(ValueError):
    """A spec this reader cannot take; the message starts with file:line:column."""


class MugraphError(SpecError):
    """The file is a μGraph (it has block ops), not a spec: the benchmark's baselines need the spec it computes."""


@dataclass(frozen=True)
class Param:
    name: str
    dtype: str
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]  # row-major unless the spec writes `{...}`

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPES[self.dtype]


@dataclass
class Stmt:
    out: str
    op: str
    args: List[str]                 # operand names, in order
    attrs: Dict[str, Union[int, float]]
    line: int
    col: int


@dataclass
class Kernel:
    name: str
    params: List[Param]
    stmts: List[Stmt]
    outputs: List[str]
    targets: List[str] = field(default_factory=list)  # the `for [...]` list, if any
    file: str = "<spec>"
    # Filled by infer(): every value's (dtype, shape), parameters included.
    types: Dict[str, Tuple[str, Tuple[int, ...]]] = field(default_factory=dict)

    @property
    def dtype(self) -> str:
        """The dtype of the kernel (of its first parameter): what tolerances and peaks are chosen by."""
        return self.params[0].dtype

    def uses(self, name: str) -> List[Stmt]:
        return [s for s in self.stmts if name in s.args]

    def output_shapes(self) -> List[Tuple[int, ...]]:
        return [self.types[o][1] for o in self.outputs]

    def bytes_once(self) -> int:
        """Bytes moved if every input is read once and every output written once: the DRAM floor's numerator."""
        ins = sum(p.nbytes for p in self.params)
        outs = sum(math.prod(self.types[o][1]) * DTYPES[self.types[o][0]] for o in self.outputs)
        return ins + outs

    def matmul_flops(self) -> int:
        """2·M·N·K·batch summed over the matmuls (multiply and add counted apart, as peaks are quoted)."""
        total = 0
        for s in self.stmts:
            if s.op == "matmul":
                a, b = self.types[s.args[0]][1], self.types[s.args[1]][1]
                out = self.types[s.out][1]
                total += 2 * math.prod(out) * a[-1]
        return total

    def attention_patterns(self) -> List[Tuple[Stmt, Stmt, Stmt]]:
        """Every A = matmul(Q, K); S = softmax(A, dim=last); O = matmul(S, V) in which A and S feed nothing else
        and are not outputs: what one scaled_dot_product_attention call (scale 1) computes. The logits may be
        scaled on the way (A = matmul(Q, K); Z = mul_scalar(A, s=c); S = softmax(Z, ...)): attention_scale()
        gives the scale of a pattern, and the mul_scalar is part of it."""
        found = []
        by_out = {s.out: s for s in self.stmts}

        def private(t: str) -> bool:
            return len(self.uses(t)) == 1 and t not in self.outputs

        for o in self.stmts:
            if o.op != "matmul":
                continue
            s = by_out.get(o.args[0])
            if s is None or s.op != "softmax" or o.args[1] == s.out:
                continue
            a = by_out.get(s.args[0])
            if a is not None and a.op == "mul_scalar" and private(a.out):
                a = by_out.get(a.args[0])
            if a is None or a.op != "matmul":
                continue
            if s.attrs["dim"] != len(self.types[s.out][1]) - 1:
                continue
            if not private(a.out) or not private(s.out):
                continue
            found.append((a, s, o))
        return found

    def attention_scale(self, pattern: Tuple[Stmt, Stmt, Stmt]) -> Tuple[float, List[str]]:
        """The scale of an attention pattern's logits (1 when unscaled) and the names its statements define
        between the first matmul and the softmax's output (what one SDPA call replaces)."""
        a, s, _ = pattern
        by_out = {st.out: st for st in self.stmts}
        mid = by_out[s.args[0]]
        if mid.op == "mul_scalar":
            return float(mid.attrs["s"]), [a.out, mid.out, s.out]
        return 1.0, [a.out, s.out]


# ---- lexer ----

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\n]+) | (?P<comment>\#[^\n]*)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>[-.]?[0-9][0-9.]*(?:[eE][-+]?[0-9]+)?|-\.[0-9]+(?:[eE][-+]?[0-9]+)?)
  | (?P<phi>-|φ)
  | (?P<punct>[()\[\]{},=:])
""", re.VERBOSE)


@dataclass
class _Tok:
    kind: str  # name, number, phi, punct, end
    text: str
    line: int
    col: int


def _lex(text: str, file: str) -> List[_Tok]:
    toks, pos, line, line_start = [], 0, 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise SpecError(f"{file}:{line}:{pos - line_start + 1}: unexpected character {text[pos]!r}")
        kind = m.lastgroup
        if kind not in ("ws", "comment"):
            toks.append(_Tok(kind, m.group(), line, pos - line_start + 1))
        for i in range(pos, m.end()):
            if text[i] == "\n":
                line, line_start = line + 1, i + 1
        pos = m.end()
    toks.append(_Tok("end", "", line, pos - line_start + 1))
    return toks


# ---- parser ----

class _Parser:
    def __init__(self, text: str, file: str):
        self.toks = _lex(text, file)
        self.i = 0
        self.file = file

    def fail(self, tok: _Tok, msg: str, error=SpecError):
        raise error(f"{self.file}:{tok.line}:{tok.col}: {msg}")

    def peek(self, k: int = 0) -> _Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self) -> _Tok:
        t = self.peek()
        self.i += 1
        return t

    def accept(self, text: str) -> bool:
        if self.peek().kind in ("punct", "name") and self.peek().text == text:
            self.i += 1
            return True
        return False

    def expect(self, text: str, why: str = "") -> _Tok:
        t = self.peek()
        if not self.accept(text):
            self.fail(t, f"expected '{text}'{' ' + why if why else ''} but found {t.text or 'end of file'!r}")
        return t

    def name(self, what: str) -> _Tok:
        t = self.next()
        if t.kind != "name":
            self.fail(t, f"expected {what} but found {t.text or 'end of file'!r}")
        return t

    def int_list(self, close: str) -> List[int]:
        items = []
        while True:
            t = self.next()
            if t.kind != "number" or not re.fullmatch(r"-?[0-9]+", t.text):
                self.fail(t, f"expected an integer but found {t.text!r}")
            items.append(int(t.text))
            if not self.accept(","):
                break
        self.expect(close)
        return items

    def kernels(self) -> List[Kernel]:
        out = []
        while self.peek().kind != "end":
            out.append(self.kernel())
        if not out:
            self.fail(self.peek(), "no kernel in the file")
        return out

    def kernel(self) -> Kernel:
        self.expect("kernel", "to start a kernel")
        name = self.name("the kernel's name").text
        self.expect("(")
        params: List[Param] = []
        if not self.accept(")"):
            while True:
                pname = self.name("a parameter name")
                self.expect(":")
                dt = self.name("a dtype (f16, bf16, f32)")
                if dt.text not in DTYPES:
                    self.fail(dt, f"unknown dtype '{dt.text}' (f16, bf16, f32)")
                self.expect("[")
                shape = self.int_list("]")
                if not 1 <= len(shape) <= 4 or min(shape) < 1:
                    self.fail(pname, f"'{pname.text}': rank 1 to 4 and extents >= 1, got {shape}")
                strides = _row_major(shape)
                if self.accept("{"):
                    strides = self.int_list("}")
                    if len(strides) != len(shape):
                        self.fail(pname, f"'{pname.text}': {len(strides)} strides for rank {len(shape)}")
                params.append(Param(pname.text, dt.text, tuple(shape), tuple(strides)))
                if not self.accept(","):
                    break
            self.expect(")")
        targets = []
        if self.accept("for"):
            self.expect("[")
            while True:
                targets.append(self.name("a target name").text)
                if not self.accept(","):
                    break
            self.expect("]")
        self.expect("{", "to open the kernel body")
        stmts: List[Stmt] = []
        outputs: List[str] = []
        while True:
            t = self.peek()
            if t.kind == "name" and t.text == "return":
                self.next()
                while True:
                    outputs.append(self.name("an output name").text)
                    if not self.accept(","):
                        break
                self.expect("}", "after the return list")
                break
            stmts.append(self.stmt())
        return Kernel(name, params, stmts, outputs, targets, self.file)

    def stmt(self) -> Stmt:
        outs = [self.name("a statement (NAME = op(...)) or 'return'")]
        while self.accept(","):
            outs.append(self.name("a result name"))
        self.expect("=")
        op = self.name("an op")
        if op.text == "block":
            self.fail(op, "a block op: this is a μGraph, and the benchmark's baselines need the spec it computes",
                      MugraphError)
        if op.text not in OPS:
            self.fail(op, f"unknown op '{op.text}' (the benchmark knows {', '.join(sorted(OPS))})")
        if len(outs) != 1:
            self.fail(outs[1], f"'{op.text}' has one result")
        self.expect("(")
        args: List[str] = []
        attrs: Dict[str, Union[int, float]] = {}
        if not self.accept(")"):
            while True:
                t = self.peek()
                if t.kind == "name" and self.peek(1).text == "=":
                    self.next(), self.next()
                    v = self.next()
                    if v.kind != "number":
                        self.fail(v, f"attribute '{t.text}' needs a number, found {v.text!r}")
                    if t.text in attrs:
                        self.fail(t, f"attribute '{t.text}' is given twice")
                    attrs[t.text] = _number(v.text)
                elif t.kind == "name":
                    args.append(self.next().text)
                elif t.kind == "number" and op.text in SCALAR and "s" not in attrs:
                    attrs["s"] = _number(self.next().text)  # mul_scalar(x, 0.5)
                else:
                    self.fail(t, f"unexpected {t.text!r} in the arguments of '{op.text}'")
                if not self.accept(","):
                    break
            self.expect(")")
        arity, accepted, required = OPS[op.text]
        if len(args) != arity:
            self.fail(op, f"'{op.text}' takes {arity} operand(s), got {len(args)}")
        for k in attrs:
            if k not in accepted:
                self.fail(op, f"'{op.text}' has no attribute '{k}'" + (f" (it takes {', '.join(accepted)})"
                                                                       if accepted else " (it takes none)"))
        for k in required:
            if k not in attrs:
                self.fail(op, f"'{op.text}' needs the attribute '{k}'")
        return Stmt(outs[0].text, op.text, args, attrs, op.line, op.col)


def _number(text: str) -> Union[int, float]:
    return int(text) if re.fullmatch(r"-?[0-9]+", text) else float(text)


def _row_major(shape: Sequence[int]) -> List[int]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return list(reversed(strides))


# ---- shapes ----

def _broadcast(a: Tuple[int, ...], b: Tuple[int, ...]) -> Optional[Tuple[int, ...]]:
    r = max(len(a), len(b))
    a1, b1 = (1,) * (r - len(a)) + a, (1,) * (r - len(b)) + b
    out = []
    for x, y in zip(a1, b1):
        if x != y and x != 1 and y != 1:
            return None
        out.append(y if x == 1 else x)
    return tuple(out)


def infer(k: Kernel) -> Kernel:
    """Checks names and shapes, normalises every `dim` to be non-negative, fills k.types; returns k."""
    types: Dict[str, Tuple[str, Tuple[int, ...]]] = {}

    def fail(s: Stmt, msg: str):
        raise SpecError(f"{k.file}:{s.line}:{s.col}: '{s.op}': {msg}")

    for p in k.params:
        if p.name in types:
            raise SpecError(f"{k.file}: parameter '{p.name}' is declared twice")
        types[p.name] = (p.dtype, p.shape)
    for s in k.stmts:
        for a in s.args:
            if a not in types:
                fail(s, f"'{a}' is not defined before its use")
        if s.out in types:
            fail(s, f"'{s.out}' is defined twice")
        ins = [types[a] for a in s.args]
        dt, shape = ins[0]
        if len(ins) == 2 and ins[1][0] != dt:
            fail(s, f"operands of different dtypes ({dt}, {ins[1][0]})")
        if "dim" in s.attrs:
            d = s.attrs["dim"]
            if not isinstance(d, int) or not -len(shape) <= d < len(shape):
                fail(s, f"dim={d} out of range for rank {len(shape)}")
            s.attrs["dim"] = d % len(shape)
        if s.op in UNARY or s.op in SCALAR or s.op in ("rms_norm", "softmax"):
            out = shape
        elif s.op in BINARY:
            out = _broadcast(shape, ins[1][1])
            if out is None:
                fail(s, f"shapes {list(shape)} and {list(ins[1][1])} do not broadcast")
        elif s.op == "matmul":
            a, b = shape, ins[1][1]
            if len(a) < 2 or len(b) < 2:
                fail(s, f"operands need rank >= 2, got {list(a)} and {list(b)}")
            if a[-1] != b[-2]:
                fail(s, f"inner dimensions differ: {list(a)} x {list(b)}")
            batch = () if len(a) == 2 and len(b) == 2 else _broadcast(a[:-2], b[:-2])
            if batch is None:
                fail(s, f"batch dims of {list(a)} and {list(b)} do not broadcast")
            out = batch + (a[-2], b[-1])
        elif s.op in REDUCE:
            d, to = s.attrs["dim"], s.attrs.get("to", 1)
            if not isinstance(to, int) or to < 1 or shape[d] % to:
                fail(s, f"to={to} does not divide dim {d} of size {shape[d]}")
            s.attrs["to"] = to
            out = shape[:d] + (to,) + shape[d + 1:]
        elif s.op == "concat":
            d, b = s.attrs["dim"], ins[1][1]
            if len(b) != len(shape) or any(x != y for i, (x, y) in enumerate(zip(shape, b)) if i != d):
                fail(s, f"operands {list(shape)} and {list(b)} differ outside the concat dim")
            out = shape[:d] + (shape[d] + b[d],) + shape[d + 1:]
        elif s.op == "transpose":
            if len(shape) < 2:
                fail(s, f"needs rank >= 2, got {list(shape)}")
            out = shape[:-2] + (shape[-1], shape[-2])
        else:  # pragma: no cover (the parser refuses unknown ops)
            fail(s, "unknown op")
        if s.op == "rms_norm":
            s.attrs.setdefault("eps", RMS_NORM_EPS)
        types[s.out] = (dt, tuple(out))
    for o in k.outputs:
        if o not in types:
            raise SpecError(f"{k.file}: returns '{o}', which is not defined")
    k.types = types
    return k


def parse(text: str, file: str = "<spec>") -> List[Kernel]:
    """Every kernel of a spec file, parsed and shape-checked."""
    return [infer(k) for k in _Parser(text, file).kernels()]


def parse_file(path) -> Kernel:
    """The one kernel of a spec file (what `morgana optimize` takes)."""
    with open(path, encoding="utf-8") as f:
        kernels = parse(f.read(), str(path))
    if len(kernels) != 1:
        raise SpecError(f"{path}: holds {len(kernels)} kernels; the benchmark takes a spec of one")
    return kernels[0]
