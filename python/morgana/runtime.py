"""The Python binding of libmorgana_runtime.so (ctypes), and a PyTorch layer over it.

This module is the one binding of the runtime's C API, `runtime/include/morgana/runtime.h` (guide:
docs/runtime-api.md): every function, enum and struct of the header has its counterpart here, and nothing else in
the tree binds the library again. It needs only the standard library; PyTorch is imported the first time a
PyTorch convenience is used, so the module imports (and bundles open and describe themselves) without it.

    from morgana.runtime import Bundle

    with Bundle("attn.mgb") as bundle:
        for p in bundle.programs:                  # every program, in bundle order
            print(p.name, [(x.name, x.shape, x.dtype.name) for x in p.params], p.variants)
        attn = bundle.select("attn", device="cuda:0")   # the program that runs on that GPU
        out = attn(q, k, v)                        # PyTorch tensors: checked, launched on the current stream

    # or with raw device pointers, on the calling thread's current CUDA context:
        attn.prepare()
        attn.launch([q_ptr, k_ptr, v_ptr, out_ptr], stream=stream_handle, workspace=ws_ptr)

Errors: a failing C call raises `MorganaError`, which carries the status (`Status`), its name (`status_name`,
e.g. "MG_ERROR_BAD_BUNDLE") and the runtime's one-line message (`message`, from mg_last_error()). A library that
cannot be found or loaded, or whose API version differs from this module's, raises `LibraryError`. Wrong tensors
given to the PyTorch layer raise `ValueError` naming the parameter.

Finding the library (`load()`), first match wins:
  1. the `path` argument of `load(path)` (or of `Bundle(..., library=path)`);
  2. the environment variable MORGANA_RUNTIME_LIB;
  3. next to a morgana build of this checkout: build/runtime/, then gpu-pack/lib/ (scripts/gpu-suite), and next
     to a `morgana` binary on PATH (its build folder's runtime/, or ../lib/ of an installed or packed tree);
  4. the dynamic loader's own search path (LD_LIBRARY_PATH, ld.so.cache): libmorgana_runtime.so(.0).

The CUDA context: the runtime launches in the *current CUDA context of the calling thread* (docs/runtime-api.md).
Raw `prepare`/`launch`/`select` calls expect the caller to have made one current. The PyTorch layer makes
PyTorch's primary context of the tensors' device current itself (`use_torch_device`).
"""

from __future__ import annotations

import ctypes
import enum
import os
import shutil
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

__all__ = [
    "API_VERSION", "MAX_RANK", "BUFFER_ALIGNMENT", "Status", "DType", "Role", "VariantKind", "Vendor", "MorganaError", "LibraryError",
    "Param", "ProgramInfo", "Variant", "DeviceInfo", "Library", "load", "find_library", "Bundle", "Program",
    "device_count", "describe_device", "api_version", "status_name", "last_error", "use_torch_device",
]

# MG_RUNTIME_API_VERSION of the header this module binds; load() refuses a library reporting another.
API_VERSION = 1
MAX_RANK = 8  # MG_MAX_RANK
# Every buffer passed to a launch starts at a multiple of this many bytes (docs/runtime-api.md, "The parameter
# contract"); the runtime refuses others with MG_ERROR_INVALID_ARGUMENT, the PyTorch layer with a ValueError.
BUFFER_ALIGNMENT = 16


# ---- enums (the header's values) ----

class Status(enum.IntEnum):
    OK = 0
    ERROR_INVALID_ARGUMENT = 1
    ERROR_IO = 2
    ERROR_BAD_BUNDLE = 3
    ERROR_NO_DRIVER = 4
    ERROR_NO_DEVICE = 5
    ERROR_NO_CONTEXT = 6
    ERROR_NO_VARIANT = 7
    ERROR_NOT_FOUND = 8
    ERROR_RESOURCES = 9
    ERROR_DRIVER = 10
    ERROR_LAUNCH = 11
    ERROR_OUT_OF_MEMORY = 12
    ERROR_INTERNAL = 13


class DType(enum.IntEnum):
    F16 = 1
    BF16 = 2
    F32 = 3

    @property
    def itemsize(self) -> int:
        return 4 if self is DType.F32 else 2

    @property
    def spec_name(self) -> str:  # as the spec language writes it
        return self.name.lower()


class Role(enum.IntEnum):
    INPUT = 1
    OUTPUT = 2
    WORKSPACE = 3


class VariantKind(enum.IntEnum):
    CUBIN = 1  # SASS for one sm_XY
    PTX = 2    # PTX for compute_XY, compiled by the driver at load
    HSACO = 3  # an AMDGPU code object


class Vendor(enum.IntEnum):
    NVIDIA = 1
    AMD = 2


# ---- errors ----

class LibraryError(OSError):
    """libmorgana_runtime.so could not be found or loaded, or its API version is not this module's."""


class MorganaError(RuntimeError):
    """A runtime call failed. `status` (Status, or the raw int for a code this module does not know),
    `status_name` ("MG_ERROR_NO_VARIANT"), `message` (mg_last_error(): what and why), `function` (the C call)."""

    def __init__(self, status: int, status_name: str, message: str, function: str = ""):
        try:
            self.status: Union[Status, int] = Status(status)
        except ValueError:
            self.status = status
        self.status_name = status_name
        self.message = message
        self.function = function
        super().__init__(f"{status_name}: {message}" if message else status_name)


# ---- the C structs ----

class _ProgramInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("mugraph", ctypes.c_char_p),
        ("num_inputs", ctypes.c_size_t),
        ("num_outputs", ctypes.c_size_t),
        ("num_params", ctypes.c_size_t),
        ("workspace_bytes", ctypes.c_uint64),
        ("num_kernels", ctypes.c_size_t),
        ("num_variants", ctypes.c_size_t),
    ]


class _ParamInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("role", ctypes.c_int),   # mg_role (a C enum: int-sized with GCC and Clang)
        ("dtype", ctypes.c_int),  # mg_dtype
        ("rank", ctypes.c_uint32),
        ("shape", ctypes.c_int64 * MAX_RANK),
        ("strides", ctypes.c_int64 * MAX_RANK),
        ("span_bytes", ctypes.c_uint64),
    ]


class _VariantInfo(ctypes.Structure):
    _fields_ = [
        ("target", ctypes.c_char_p),
        ("kind", ctypes.c_int),  # mg_variant_kind
        ("arch", ctypes.c_char_p),
        ("payload_bytes", ctypes.c_uint64),
    ]


class _DeviceInfo(ctypes.Structure):
    _fields_ = [
        ("vendor", ctypes.c_int),  # mg_vendor
        ("ordinal", ctypes.c_int),
        ("name", ctypes.c_char * 256),
        ("arch", ctypes.c_char * 64),
        ("cc_major", ctypes.c_int),
        ("cc_minor", ctypes.c_int),
        ("sm_count", ctypes.c_int),
        ("max_threads_per_block", ctypes.c_int),
        ("smem_per_block", ctypes.c_int),
        ("smem_per_block_optin", ctypes.c_int),
        ("driver_version", ctypes.c_int),
    ]


# ---- the Python view of the structs ----

def _text(b: Optional[bytes]) -> str:
    return "" if b is None else b.decode("utf-8", errors="replace")


def _enum(cls, value: int):
    try:
        return cls(value)
    except ValueError:
        return value  # a value a newer library added: kept as the raw int


@dataclass(frozen=True)
class Param:
    """One parameter of a program (mg_param_info). Shapes and strides count elements."""
    index: int
    name: str
    role: Role
    dtype: DType
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    span_bytes: int  # from the first element to the end of the last: the smallest buffer that holds it

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:  # of the elements themselves (span_bytes when the strides leave no gaps)
        return self.numel * self.dtype.itemsize

    def __str__(self) -> str:
        dt = self.dtype.spec_name if isinstance(self.dtype, DType) else str(self.dtype)
        role = self.role.name.lower() if isinstance(self.role, Role) else str(self.role)
        return f"{role} {self.name}: {dt}[{','.join(map(str, self.shape))}]{{{','.join(map(str, self.strides))}}}"


@dataclass(frozen=True)
class ProgramInfo:
    """mg_program_info."""
    name: str
    mugraph: str
    num_inputs: int
    num_outputs: int
    num_params: int
    workspace_bytes: int
    num_kernels: int
    num_variants: int


@dataclass(frozen=True)
class Variant:
    """One code object of a program (mg_variant_info); `index` is its place in the program's variant list."""
    index: int
    target: str
    kind: VariantKind
    arch: str
    payload_bytes: int

    def __str__(self) -> str:
        kind = self.kind.name.lower() if isinstance(self.kind, VariantKind) else str(self.kind)
        return f"{self.target} {kind} {self.arch}"


@dataclass(frozen=True)
class DeviceInfo:
    """mg_device_info."""
    vendor: Vendor
    ordinal: int
    name: str
    arch: str
    cc_major: int
    cc_minor: int
    sm_count: int
    max_threads_per_block: int
    smem_per_block: int
    smem_per_block_optin: int
    driver_version: int


# ---- the library ----

_LIB_NAME = "libmorgana_runtime.so"


def _repo_root() -> Path:
    return Path(__file__).resolve().parent.parent.parent  # python/morgana/runtime.py -> the checkout


def find_library(path: Union[str, os.PathLike, None] = None) -> str:
    """Where load() would load the library from (see the module's docstring for the order). A bare file name
    means the dynamic loader's own search."""
    if path is not None:
        return os.fspath(path)
    env = os.environ.get("MORGANA_RUNTIME_LIB")
    if env:
        return env
    candidates: List[Path] = []
    root = _repo_root()
    candidates += [root / "build" / "runtime" / _LIB_NAME, root / "gpu-pack" / "lib" / _LIB_NAME]
    exe = shutil.which("morgana")
    if exe:
        bindir = Path(exe).resolve().parent
        candidates += [bindir / "runtime" / _LIB_NAME, bindir.parent / "lib" / _LIB_NAME]
    for c in candidates:
        if c.is_file():
            return str(c)
    return _LIB_NAME


class Library:
    """libmorgana_runtime.so, loaded, with every function of runtime.h bound and its API version checked.
    Most code uses the module's default (`load()`), which Bundle and the device functions take by default."""

    def __init__(self, path: Union[str, os.PathLike, None] = None):
        where = find_library(path)
        tried = [where]
        try:
            lib = ctypes.CDLL(where)
        except OSError as e:
            if os.sep in where or where != _LIB_NAME:
                raise LibraryError(f"cannot load the morgana runtime from {where}: {e}") from None
            try:  # the loader path may hold only the versioned name
                tried.append(_LIB_NAME + ".0")
                lib = ctypes.CDLL(_LIB_NAME + ".0")
            except OSError:
                raise LibraryError(
                    f"cannot find the morgana runtime ({', '.join(tried)}): pass its path, set MORGANA_RUNTIME_LIB, "
                    f"or build it (ninja -C build runtime/libmorgana_runtime.so): {e}") from None
        self.path = where
        self._lib = lib
        self._bind()
        version = lib.mg_runtime_api_version()
        if version != API_VERSION:
            raise LibraryError(f"{where}: runtime API version {version}, this binding is for version {API_VERSION}")
        self.api_version = version

    def _bind(self) -> None:
        L = self._lib
        P, S, I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
        sigs = {
            "mg_status_name": (ctypes.c_char_p, [I]),
            "mg_last_error": (ctypes.c_char_p, []),
            "mg_runtime_api_version": (I, []),
            "mg_bundle_open": (I, [ctypes.c_char_p, ctypes.POINTER(P)]),
            "mg_bundle_open_memory": (I, [P, S, ctypes.POINTER(P)]),
            "mg_bundle_close": (None, [P]),
            "mg_bundle_program_count": (S, [P]),
            "mg_bundle_program": (I, [P, S, ctypes.POINTER(P)]),
            "mg_program_describe": (I, [P, ctypes.POINTER(_ProgramInfo)]),
            "mg_program_param": (I, [P, S, ctypes.POINTER(_ParamInfo)]),
            "mg_program_variant": (I, [P, S, ctypes.POINTER(_VariantInfo)]),
            "mg_bundle_select_program": (I, [P, ctypes.c_char_p, ctypes.POINTER(P)]),
            "mg_program_prepare": (I, [P, ctypes.POINTER(S)]),
            "mg_program_launch": (I, [P, P, ctypes.POINTER(P), S, P]),
            "mg_bundle_launch": (I, [P, ctypes.c_char_p, P, ctypes.POINTER(P), S, P]),
            "mg_device_count": (I, [ctypes.POINTER(I)]),
            "mg_device_describe": (I, [I, ctypes.POINTER(_DeviceInfo)]),
        }
        for name, (res, args) in sigs.items():
            try:
                f = getattr(L, name)
            except AttributeError:
                raise LibraryError(f"{self.path if hasattr(self, 'path') else L._name}: no function {name}") from None
            f.restype = res
            f.argtypes = args
            setattr(self, name, f)

    # The raw C functions are attributes of the same names (lib.mg_bundle_open, ...). The helpers below turn a
    # status into MorganaError.

    def status_name(self, status: int) -> str:
        return _text(self.mg_status_name(int(status)))

    def last_error(self) -> str:
        return _text(self.mg_last_error())

    def check(self, status: int, function: str = "") -> None:
        if status != Status.OK:
            # mg_last_error() is per thread and read right after the failing call on this same thread.
            raise MorganaError(status, self.status_name(status), self.last_error(), function)


_default_lock = threading.Lock()
_libraries: dict = {}


def load(path: Union[str, os.PathLike, None] = None) -> Library:
    """The Library at `path` (or found as described in the module docstring), loaded once per process and path."""
    where = find_library(path)
    key = os.path.realpath(where) if os.sep in where else where
    with _default_lock:
        lib = _libraries.get(key)
        if lib is None:
            lib = Library(where)
            _libraries[key] = lib
            _libraries.setdefault(None, lib)
        return lib


def _library(library: Union[Library, str, os.PathLike, None]) -> Library:
    if isinstance(library, Library):
        return library
    if library is None and None in _libraries:
        return _libraries[None]
    return load(library)


def api_version(library: Union[Library, str, None] = None) -> int:
    """mg_runtime_api_version() of the loaded library."""
    return _library(library).mg_runtime_api_version()


def status_name(status: int, library: Union[Library, str, None] = None) -> str:
    """mg_status_name()."""
    return _library(library).status_name(status)


def last_error(library: Union[Library, str, None] = None) -> str:
    """mg_last_error(): the message of this thread's most recent failed call."""
    return _library(library).last_error()


def device_count(library: Union[Library, str, None] = None) -> int:
    """mg_device_count(): the GPUs the driver sees (loads the driver on first use)."""
    lib = _library(library)
    n = ctypes.c_int(0)
    lib.check(lib.mg_device_count(ctypes.byref(n)), "mg_device_count")
    return n.value


def describe_device(ordinal: int = -1, library: Union[Library, str, None] = None) -> DeviceInfo:
    """mg_device_describe(): device `ordinal`, or the current context's device for -1."""
    lib = _library(library)
    d = _DeviceInfo()
    lib.check(lib.mg_device_describe(int(ordinal), ctypes.byref(d)), "mg_device_describe")
    return DeviceInfo(_enum(Vendor, d.vendor), d.ordinal, _text(d.name), _text(d.arch), d.cc_major, d.cc_minor,
                      d.sm_count, d.max_threads_per_block, d.smem_per_block, d.smem_per_block_optin,
                      d.driver_version)


# ---- bundles and programs ----

class Bundle:
    """An open bundle (mg_bundle_open). Use as a context manager or call close(); close it before the CUDA
    contexts it launched in are destroyed (docs/runtime-api.md, "Modules"). Programs and strings taken from it
    become invalid when it closes: using them afterwards raises ValueError."""

    def __init__(self, path: Union[str, os.PathLike], library: Union[Library, str, None] = None):
        self._lib = _library(library)
        self.path = os.fspath(path)
        handle = ctypes.c_void_p()
        self._lib.check(self._lib.mg_bundle_open(os.fsencode(self.path), ctypes.byref(handle)), "mg_bundle_open")
        self._init(handle)

    @classmethod
    def from_bytes(cls, data: bytes, library: Union[Library, str, None] = None) -> "Bundle":
        """mg_bundle_open_memory: a bundle from bytes (copied by the runtime)."""
        self = cls.__new__(cls)
        self._lib = _library(library)
        self.path = "<memory>"
        data = bytes(data)
        handle = ctypes.c_void_p()
        self._lib.check(self._lib.mg_bundle_open_memory(data, len(data), ctypes.byref(handle)),
                        "mg_bundle_open_memory")
        self._init(handle)
        return self

    def _init(self, handle: ctypes.c_void_p) -> None:
        self._handle: Optional[int] = handle.value
        self._programs: Optional[List[Program]] = None
        self._lock = threading.Lock()

    # -- lifetime --

    def close(self) -> None:
        """mg_bundle_close. Idempotent."""
        h, self._handle = self._handle, None
        if h:
            self._lib.mg_bundle_close(h)

    def __enter__(self) -> "Bundle":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        # At interpreter exit the driver (and ctypes) may already be gone: leak rather than call into them.
        if getattr(self, "_handle", None) and not sys.is_finalizing():
            try:
                self.close()
            except Exception:
                pass

    @property
    def closed(self) -> bool:
        return self._handle is None

    def _h(self) -> int:
        if self._handle is None:
            raise ValueError(f"bundle {self.path} is closed")
        return self._handle

    # -- introspection (no GPU needed) --

    @property
    def programs(self) -> List["Program"]:
        """Every program, in bundle order (a name appears more than once when each copy serves other GPUs)."""
        h = self._h()
        with self._lock:
            if self._programs is None:
                progs = []
                for i in range(self._lib.mg_bundle_program_count(h)):
                    p = ctypes.c_void_p()
                    self._lib.check(self._lib.mg_bundle_program(h, i, ctypes.byref(p)), "mg_bundle_program")
                    progs.append(Program(self, p.value, i))
                self._programs = progs
            return list(self._programs)

    @property
    def program_names(self) -> List[str]:
        """The distinct program names, in bundle order."""
        names: List[str] = []
        for p in self.programs:
            if p.name not in names:
                names.append(p.name)
        return names

    def _program_at(self, pointer: int) -> "Program":
        for p in self.programs:
            if p._handle == pointer:
                return p
        raise MorganaError(Status.ERROR_INTERNAL, "MG_ERROR_INTERNAL", "select returned a program not in the bundle")

    # -- on the GPU --

    def select(self, name: str, device: Any = None) -> "Program":
        """mg_bundle_select_program: the program `name` that runs on the GPU of the current CUDA context. With
        `device` (a torch device, "cuda:1" or an index), PyTorch's context of that device is made current for
        the call (see use_torch_device)."""
        def call() -> "Program":
            p = ctypes.c_void_p()
            self._lib.check(self._lib.mg_bundle_select_program(self._h(), name.encode(), ctypes.byref(p)),
                            "mg_bundle_select_program")
            return self._program_at(p.value)
        return call() if device is None else _on_torch_device(device, call)

    def launch(self, name: str, args: Sequence[int], stream: Any = None, workspace: Optional[int] = None) -> None:
        """mg_bundle_launch: select `name` for the current context, then launch it (raw pointers, as
        Program.launch)."""
        argv = _pointer_array(args)
        self._lib.check(self._lib.mg_bundle_launch(self._h(), name.encode(), _stream_handle(stream), argv,
                                                    len(args), _ptr(workspace)), "mg_bundle_launch")

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self.programs)} program(s)"
        return f"<morgana.runtime.Bundle {self.path}: {state}>"


def _ptr(v: Any) -> Optional[int]:
    if v is None:
        return None
    if hasattr(v, "data_ptr"):  # a torch tensor
        return int(v.data_ptr()) or None
    return int(v) or None


def _pointer_array(args: Sequence[Any]):
    arr = (ctypes.c_void_p * max(len(args), 1))()
    for i, a in enumerate(args):
        arr[i] = _ptr(a)
    return arr


def _stream_handle(stream: Any) -> Optional[int]:
    """A CUstream value from None (the context's default stream), an int, or an object with `.cuda_stream` (a
    torch.cuda.Stream) or `.ptr` (a CuPy stream)."""
    if stream is None:
        return None
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            stream = getattr(stream, attr)
            break
    return int(stream) or None


class Program:
    """One program of a bundle (an mg_program, owned by the bundle). `info`, `params`, `inputs`, `outputs`,
    `workspace`, `variants` need no GPU; `prepare`, `launch` and calling it with tensors do."""

    def __init__(self, bundle: Bundle, handle: int, index: int):
        self.bundle = bundle
        self._handle = handle
        self.index = index
        lib = bundle._lib
        info = _ProgramInfo()
        lib.check(lib.mg_program_describe(handle, ctypes.byref(info)), "mg_program_describe")
        self.info = ProgramInfo(_text(info.name), _text(info.mugraph), info.num_inputs, info.num_outputs,
                                info.num_params, info.workspace_bytes, info.num_kernels, info.num_variants)
        params = []
        for i in range(info.num_params):
            p = _ParamInfo()
            lib.check(lib.mg_program_param(handle, i, ctypes.byref(p)), "mg_program_param")
            r = p.rank
            params.append(Param(i, _text(p.name), _enum(Role, p.role), _enum(DType, p.dtype),
                                tuple(p.shape[:r]), tuple(p.strides[:r]), p.span_bytes))
        self.params: List[Param] = params
        variants = []
        for i in range(info.num_variants):
            v = _VariantInfo()
            lib.check(lib.mg_program_variant(handle, i, ctypes.byref(v)), "mg_program_variant")
            variants.append(Variant(i, _text(v.target), _enum(VariantKind, v.kind), _text(v.arch), v.payload_bytes))
        self.variants: List[Variant] = variants
        self._workspaces: dict = {}
        self._ws_lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def inputs(self) -> List[Param]:
        return self.params[: self.info.num_inputs]

    @property
    def outputs(self) -> List[Param]:
        n = self.info.num_inputs
        return self.params[n: n + self.info.num_outputs]

    @property
    def workspace(self) -> Optional[Param]:
        """The workspace parameter, present exactly when info.workspace_bytes > 0."""
        rest = self.params[self.info.num_inputs + self.info.num_outputs:]
        return rest[0] if rest else None

    def _h(self) -> int:
        self.bundle._h()  # raises when the bundle is closed
        return self._handle

    def prepare(self, device: Any = None) -> Variant:
        """mg_program_prepare: loads the code for the current context now (not at the first launch) and checks
        its kernels against the device; returns the variant chosen. With `device`, PyTorch's context of that
        device is made current for the call."""
        def call() -> Variant:
            chosen = ctypes.c_size_t(0)
            lib = self.bundle._lib
            lib.check(lib.mg_program_prepare(self._h(), ctypes.byref(chosen)), "mg_program_prepare")
            return self.variants[chosen.value]
        return call() if device is None else _on_torch_device(device, call)

    def launch(self, args: Sequence[int], stream: Any = None, workspace: Optional[int] = None) -> None:
        """mg_program_launch: queues the kernels on `stream` (a CUstream as an int, an object with `.cuda_stream`,
        or None for the context's default stream) in the calling thread's current context. `args` are the device
        pointers (ints) of the inputs then the outputs; `workspace` a device buffer of at least
        info.workspace_bytes, or None when it needs none. Every pointer is a multiple of BUFFER_ALIGNMENT (16)
        bytes. Returns once the kernels are queued."""
        lib = self.bundle._lib
        lib.check(lib.mg_program_launch(self._h(), _stream_handle(stream), _pointer_array(args), len(args),
                                        _ptr(workspace)), "mg_program_launch")

    # -- PyTorch --

    def __call__(self, *inputs: Any, out: Any = None, stream: Any = None, workspace: Any = None):
        """Runs the program on PyTorch CUDA tensors and returns its outputs (one tensor, or a tuple when it has
        several). Every tensor must match its parameter's dtype, shape and strides (strides of extent-1 dims
        are not compared: they address nothing), live on one CUDA device and start at a multiple of 16 bytes
        (any tensor PyTorch allocates does; a view at an offset may not); otherwise ValueError names the
        parameter. Outputs are allocated there unless `out` (a tensor, or a sequence of them) is given. The
        launch goes to `stream` (a torch.cuda.Stream or raw handle), by default the device's current stream,
        so it is ordered with the surrounding PyTorch work and can be captured in a CUDA graph. The workspace
        is a buffer cached per device (one per Program; programs launched concurrently on several streams of
        one device should each pass their own `workspace=` tensor). Call once before capturing a CUDA graph,
        so that the code is loaded and the workspace allocated outside the capture."""
        torch = _torch()
        info = self.info
        if len(inputs) != info.num_inputs:
            names = ", ".join(p.name for p in self.inputs)
            raise ValueError(f"program '{self.name}' takes {info.num_inputs} input(s) ({names}), got {len(inputs)}")
        given = list(zip(self.inputs, inputs))
        if out is not None:
            outs = [out] if isinstance(out, torch.Tensor) else list(out)
            if len(outs) != info.num_outputs:
                raise ValueError(f"program '{self.name}' has {info.num_outputs} output(s), out= gives {len(outs)}")
            given += list(zip(self.outputs, outs))
        for p, t in given:  # every layout first, then where they live: the message names the first real mistake
            _check_tensor(torch, self, p, t)
        device = None
        for p, t in given:
            device = _check_place(self, p, t, device)
        if device is None:  # no inputs, outputs allocated: nothing says where
            device = torch.device("cuda", torch.cuda.current_device())
        allocated = out is None
        if allocated:
            outs = [torch.empty_strided(p.shape, p.strides, dtype=_torch_dtype(torch, p), device=device)
                    for p in self.outputs]

        def call() -> None:
            s = torch.cuda.current_stream(device) if stream is None else stream
            ws = workspace
            if ws is None and info.workspace_bytes > 0:
                ws = self._workspace_on(torch, device)
            elif ws is not None and isinstance(ws, torch.Tensor):
                if ws.device != device:
                    raise ValueError(f"program '{self.name}': workspace= is on {ws.device}, the tensors on {device}")
                if ws.numel() * ws.element_size() < info.workspace_bytes:
                    raise ValueError(f"program '{self.name}': workspace= has {ws.numel() * ws.element_size()} "
                                     f"bytes, the program needs {info.workspace_bytes}")
            self.launch([t.data_ptr() for t in list(inputs) + outs], stream=s, workspace=ws)
            if allocated and isinstance(s, torch.cuda.Stream) and s != torch.cuda.current_stream(device):
                for t in outs:  # allocated on the current stream, written on `s`
                    t.record_stream(s)

        _on_torch_device(device, call)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _workspace_on(self, torch, device):
        with self._ws_lock:
            ws = self._workspaces.get(device.index)
            if ws is None:
                ws = torch.empty(self.info.workspace_bytes, dtype=torch.uint8, device=device)
                self._workspaces[device.index] = ws
            return ws

    def __repr__(self) -> str:
        return (f"<morgana.runtime.Program {self.name} #{self.index}: {self.info.num_inputs} in, "
                f"{self.info.num_outputs} out, {self.info.num_kernels} kernel(s), variants "
                f"[{', '.join(map(str, self.variants))}]>")


# ---- PyTorch plumbing (torch imported lazily) ----

def _torch():
    try:
        import torch  # noqa: PLC0415 (lazy on purpose: the binding works without PyTorch)
    except ImportError as e:
        raise ImportError("this part of morgana.runtime needs PyTorch (import torch failed: %s)" % e) from None
    return torch


def _torch_dtype(torch, p: Param):
    table = {DType.F16: torch.float16, DType.BF16: torch.bfloat16, DType.F32: torch.float32}
    if p.dtype not in table:
        raise ValueError(f"parameter '{p.name}': dtype code {p.dtype} has no PyTorch dtype here")
    return table[p.dtype]


def _check_tensor(torch, program: Program, p: Param, t: Any) -> None:
    """The tensor's type, dtype, shape and strides against the parameter's (ValueError naming it)."""
    where = _where(program, p)
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{where}: expected a torch.Tensor, got {type(t).__name__}")
    want = _torch_dtype(torch, p)
    if t.dtype != want:
        raise ValueError(f"{where}: dtype {t.dtype}, the program needs {want} ({p.dtype.spec_name})")
    if tuple(t.shape) != p.shape:
        raise ValueError(f"{where}: shape {tuple(t.shape)}, the program needs {p.shape}")
    strides = tuple(t.stride())
    if any(n > 1 and s != w for n, s, w in zip(p.shape, strides, p.strides)):
        raise ValueError(f"{where}: strides {strides}, the program needs {p.strides} "
                         f"(.contiguous() gives row-major strides)")


def _check_place(program: Program, p: Param, t: Any, device) -> Any:
    """The tensor's device (CUDA, the same as the others') and alignment; returns its device."""
    where = _where(program, p)
    if t.device.type != "cuda":
        raise ValueError(f"{where}: the tensor is on {t.device}, a CUDA tensor is needed")
    if device is not None and t.device != device:
        raise ValueError(f"{where}: the tensor is on {t.device}, the others on {device}")
    if t.numel() > 0 and t.data_ptr() % BUFFER_ALIGNMENT:
        raise ValueError(f"{where}: its data does not start at a multiple of {BUFFER_ALIGNMENT} bytes (a view at "
                         f"an offset?): pass a copy (.clone())")
    return t.device


def _where(program: Program, p: Param) -> str:
    role = p.role.name.lower() if isinstance(p.role, Role) else "parameter"
    return f"program '{program.name}', {role} '{p.name}'"


_tls = threading.local()


def use_torch_device(device: Any = None):
    """Makes PyTorch's CUDA context (the primary context) of `device` current on the calling thread, and returns
    the torch.device. `device`: a torch.device, "cuda:N", an index, or None for torch's current device.

    PyTorch creates contexts lazily and makes one current on a thread only when that thread first needs it; the
    morgana runtime works in whatever context is current. A device synchronisation is a runtime call that
    needs the context, so the first use on each thread and device synchronises once. Afterwards
    torch.cuda.device(...) (which the PyTorch layer wraps around every call) switches between primary contexts.
    Never call this for the first time on a thread while that thread is capturing a CUDA graph."""
    torch = _torch()
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device())
    elif isinstance(device, int):
        device = torch.device("cuda", device)
    else:
        device = torch.device(device)
        if device.type != "cuda":
            raise ValueError(f"{device} is not a CUDA device")
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
    ready = getattr(_tls, "ready", None)
    if ready is None:
        ready = _tls.ready = set()
    if device.index not in ready:
        torch.cuda.init()
        torch.cuda.synchronize(device)
        ready.add(device.index)
    return device


def _on_torch_device(device: Any, fn):
    """Runs fn() with PyTorch's context of `device` current on this thread; a NO_CONTEXT failure (something
    cleared the thread's context since) is retried once after making it current again."""
    torch = _torch()
    device = use_torch_device(device)
    with torch.cuda.device(device):
        try:
            return fn()
        except MorganaError as e:
            if e.status != Status.ERROR_NO_CONTEXT:
                raise
            torch.cuda.synchronize(device)
            return fn()
