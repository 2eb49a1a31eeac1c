"""Python bindings for gmprof: per-range GPU hardware metrics through NVIDIA CUPTI.

A thin :mod:`ctypes` wrapper over the C ABI of ``libgmprof.so`` (``include/gmprof.h``).
Nothing here needs a GPU to import; the shared library is loaded the first time a
function that needs it is called.

Typical use::

    import gmprof

    gmprof.init(mode="kernel_replay", metrics=["sm__throughput.avg.pct_of_peak_sustained_elapsed"])
    for step in range(10):
        with gmprof.range("step"):
            train_step()
    out_dir = gmprof.finish()   # ranges.csv, kernels.csv, ..., report.json, trace.json

Library lookup (first that loads wins):

1. ``$GMPROF_LIBRARY`` -- when set, it is the only candidate;
2. ``libgmprof.so`` in this package's directory (where the wheel puts it);
3. ``target/release/libgmprof.so`` then ``target/debug/libgmprof.so`` in the repository
   root (the first directory above this package that holds a ``Cargo.toml``);
4. ``ctypes.util.find_library("gmprof")``, else the bare name ``libgmprof.so``
   (the system loader's search path, ``LD_LIBRARY_PATH``).

If nothing loads, the first call raises :class:`GmprofError` listing every path tried.
Before loading, the lib directories of NVIDIA's pip wheels on ``sys.path`` (see
:func:`cuda_lib_dirs`) are added to ``$GMPROF_CUDA_LIB_DIRS``, where the library looks for
libcupti.

Captures: ``with gmprof.capture(mode="per_kernel"):`` profiles a block the program chooses; under
``gmprof run --on-demand`` it is the run's next ``capture-K`` (see :mod:`gmprof._capture`).

Results: :func:`load` reads an output directory back (pandas DataFrames when pandas is
installed); it needs neither a GPU nor the library. :func:`diff` compares two runs (the
``gmprof diff`` command's rows, each change judged against the runs' noise).

Disabling: with ``GMPROF_DISABLE=1`` (also ``true``/``yes``/``on``) in the environment,
:func:`init`, :func:`push_range`, :func:`pop_range`, :func:`finish` and :func:`range` do
nothing and never load the library, so annotations can stay in production code. The
variable is read on every call; set it before the program starts rather than toggling it
while ranges are open.

Threads: the C library is thread-safe. Ranges are per thread: :func:`pop_range` closes the
innermost range opened by the *calling* thread, so push and pop a range on the same thread.
:func:`init` and :func:`finish` are process-wide and should be called once each.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
import threading
from typing import Any, Callable, Iterable, List, Optional, TypeVar, Union, overload

__all__ = [
    "GmprofError",
    "init",
    "push_range",
    "pop_range",
    "finish",
    "version",
    "is_initialized",
    "is_enabled",
    "range",
    "library_path",
    "cuda_lib_dirs",
    "load",
    "diff",
    "Report",
    "capture",
    "capture_start",
    "capture_stop",
]

F = TypeVar("F", bound=Callable[..., Any])

# --------------------------------------------------------------------------------------
# Status codes (mirror `gmprof_status` in include/gmprof.h)
# --------------------------------------------------------------------------------------

GMPROF_OK = 0
GMPROF_ERROR_INVALID_ARGUMENT = 1
GMPROF_ERROR_NOT_INITIALIZED = 2
GMPROF_ERROR_ALREADY_INITIALIZED = 3
GMPROF_ERROR_UNBALANCED = 4
GMPROF_ERROR_LIBRARY_NOT_FOUND = 5
GMPROF_ERROR_CUPTI = 6
GMPROF_ERROR_CUDA = 7
GMPROF_ERROR_UNKNOWN_METRIC = 8
GMPROF_ERROR_IO = 9
GMPROF_ERROR_INTERNAL = 10

STATUS_NAMES = {
    GMPROF_OK: "GMPROF_OK",
    GMPROF_ERROR_INVALID_ARGUMENT: "GMPROF_ERROR_INVALID_ARGUMENT",
    GMPROF_ERROR_NOT_INITIALIZED: "GMPROF_ERROR_NOT_INITIALIZED",
    GMPROF_ERROR_ALREADY_INITIALIZED: "GMPROF_ERROR_ALREADY_INITIALIZED",
    GMPROF_ERROR_UNBALANCED: "GMPROF_ERROR_UNBALANCED",
    GMPROF_ERROR_LIBRARY_NOT_FOUND: "GMPROF_ERROR_LIBRARY_NOT_FOUND",
    GMPROF_ERROR_CUPTI: "GMPROF_ERROR_CUPTI",
    GMPROF_ERROR_CUDA: "GMPROF_ERROR_CUDA",
    GMPROF_ERROR_UNKNOWN_METRIC: "GMPROF_ERROR_UNKNOWN_METRIC",
    GMPROF_ERROR_IO: "GMPROF_ERROR_IO",
    GMPROF_ERROR_INTERNAL: "GMPROF_ERROR_INTERNAL",
}


def status_name(status: int) -> str:
    """The C enumerator name of a ``gmprof_status`` value (``GMPROF_STATUS_<n>`` if unknown)."""
    return STATUS_NAMES.get(status, "GMPROF_STATUS_%d" % status)


class GmprofError(RuntimeError):
    """A gmprof call failed.

    Attributes:
        status: the ``gmprof_status`` integer returned by the C call.
        status_name: its enumerator name, e.g. ``"GMPROF_ERROR_UNBALANCED"``.
        message: the library's message (``gmprof_last_error()``), possibly empty.
    """

    def __init__(self, status: int, message: str = "", function: Optional[str] = None) -> None:
        self.status: int = int(status)
        self.status_name: str = status_name(self.status)
        self.message: str = message
        self.function: Optional[str] = function
        where = "%s: " % function if function else ""
        text = "%s%s" % (where, self.status_name)
        if message:
            text += ": " + message
        super().__init__(text)


# --------------------------------------------------------------------------------------
# The C structure
# --------------------------------------------------------------------------------------


class GmprofOptions(ctypes.Structure):
    """``struct gmprof_options`` from include/gmprof.h."""

    _fields_ = [
        ("mode", ctypes.c_char_p),
        ("metrics", ctypes.c_char_p),
        ("output_dir", ctypes.c_char_p),
        ("device", ctypes.c_int),
        ("synchronize_on_pop", ctypes.c_int),
    ]


# --------------------------------------------------------------------------------------
# Library loading
# --------------------------------------------------------------------------------------

_LIBRARY_NAME = "libgmprof.so"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

_lock = threading.Lock()
_lib: Any = None
_lib_path: Optional[str] = None
_initialized = False
_output_dir: Optional[str] = None


def _repo_root(start: str) -> Optional[str]:
    """The first directory at or above ``start`` that holds a Cargo.toml."""
    here = start
    while True:
        if os.path.isfile(os.path.join(here, "Cargo.toml")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _candidates() -> List[str]:
    """Library paths to try, in order (see the module docstring)."""
    explicit = os.environ.get("GMPROF_LIBRARY")
    if explicit:
        return [explicit]
    paths = [os.path.join(_PACKAGE_DIR, _LIBRARY_NAME)]
    root = _repo_root(_PACKAGE_DIR)
    if root is not None:
        for profile in ("release", "debug"):
            paths.append(os.path.join(root, "target", profile, _LIBRARY_NAME))
    found = ctypes.util.find_library("gmprof")
    paths.append(found if found else _LIBRARY_NAME)
    return paths


# Where NVIDIA's pip wheels (which PyTorch installs) keep their libraries, relative to a
# site-packages directory; mirrors PIP_LIB_SUBDIRS in src/checked/library.rs.
_PIP_LIB_SUBDIRS = ("nvidia/cu13/lib", "nvidia/cuda_cupti/lib", "nvidia/cuda_runtime/lib")


def cuda_lib_dirs(paths: Optional[Iterable[str]] = None) -> List[str]:
    """The lib directories of NVIDIA's pip wheels (``nvidia-cuda-cupti-cu13`` and friends).

    Looks under each directory of ``paths`` (default ``sys.path``, which holds this
    environment's site-packages) for ``nvidia/cu13/lib``, ``nvidia/cuda_cupti/lib`` and
    ``nvidia/cuda_runtime/lib``; returns the existing ones, without duplicates. The library
    gets them through ``$GMPROF_CUDA_LIB_DIRS`` and searches them for libcupti after
    ``$CUDA_HOME`` and before ``/usr/local/cuda``, so a PyTorch venv needs no system CUDA.
    """
    out: List[str] = []
    for base in sys.path if paths is None else paths:
        if not base or not os.path.isdir(base):
            continue
        for sub in _PIP_LIB_SUBDIRS:
            d = os.path.abspath(os.path.join(base, *sub.split("/")))
            if os.path.isdir(d) and d not in out:
                out.append(d)
    return out


def _export_cuda_lib_dirs() -> None:
    """Adds :func:`cuda_lib_dirs` to ``$GMPROF_CUDA_LIB_DIRS`` (kept first: the user's)."""
    current = [d for d in os.environ.get("GMPROF_CUDA_LIB_DIRS", "").split(os.pathsep) if d]
    merged = current + [d for d in cuda_lib_dirs() if d not in current]
    if merged:
        os.environ["GMPROF_CUDA_LIB_DIRS"] = os.pathsep.join(merged)


def _configure(lib: Any) -> Any:
    """Declares the C signatures on a freshly loaded CDLL."""
    status = ctypes.c_int
    lib.gmprof_init.argtypes = [ctypes.POINTER(GmprofOptions)]
    lib.gmprof_init.restype = status
    lib.gmprof_push_range.argtypes = [ctypes.c_char_p]
    lib.gmprof_push_range.restype = status
    lib.gmprof_pop_range.argtypes = []
    lib.gmprof_pop_range.restype = status
    lib.gmprof_finish.argtypes = []
    lib.gmprof_finish.restype = status
    lib.gmprof_last_error.argtypes = []
    lib.gmprof_last_error.restype = ctypes.c_char_p
    lib.gmprof_version.argtypes = []
    lib.gmprof_version.restype = ctypes.c_char_p
    if hasattr(lib, "gmprof_output_dir"):
        lib.gmprof_output_dir.argtypes = []
        lib.gmprof_output_dir.restype = ctypes.c_char_p
    if hasattr(lib, "gmprof_capture_start"):
        lib.gmprof_capture_start.argtypes = [ctypes.POINTER(GmprofOptions)]
        lib.gmprof_capture_start.restype = status
        lib.gmprof_capture_stop.argtypes = []
        lib.gmprof_capture_stop.restype = status
    return lib


def _load() -> Any:
    """Loads libgmprof.so on first use; raises GmprofError listing every path tried."""
    global _lib, _lib_path
    lib = _lib
    if lib is not None:
        return lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        _export_cuda_lib_dirs()
        for path in _candidates():
            try:
                lib = ctypes.CDLL(path)
            except OSError as err:
                tried.append("  %s: %s" % (path, err))
                continue
            try:
                _configure(lib)
            except AttributeError as err:
                tried.append("  %s: loaded, but it is not libgmprof (%s)" % (path, err))
                continue
            _lib, _lib_path = lib, path
            return lib
        raise GmprofError(
            GMPROF_ERROR_LIBRARY_NOT_FOUND,
            "libgmprof could not be loaded; tried:\n"
            + "\n".join(tried)
            + "\nbuild it with `cargo build --release` or set GMPROF_LIBRARY to its path",
        )


def _set_library(lib: Any, path: Optional[str] = None) -> None:
    """INTERNAL test hook: use ``lib`` in place of libgmprof.so.

    ``lib`` needs the attributes ``gmprof_init``, ``gmprof_push_range``, ``gmprof_pop_range``,
    ``gmprof_finish``, ``gmprof_last_error`` and ``gmprof_version`` with the C calling
    conventions as seen through ctypes (names arrive as ``bytes``, ``gmprof_init`` gets a
    ``POINTER(GmprofOptions)``, ``gmprof_last_error``/``gmprof_version`` return ``bytes``).
    ``None`` forgets the current library so that the next call loads it again. Either way
    the Python-side initialized flag is reset. Not part of the public API.
    """
    global _lib, _lib_path, _initialized, _output_dir
    with _lock:
        _lib = lib
        _lib_path = path
        _initialized = False
        _output_dir = None


def library_path() -> str:
    """The path libgmprof was loaded from (loading it if needed)."""
    _load()
    return _lib_path or "<injected>"


def _decode(raw: Any) -> str:
    if raw is None:
        return ""
    if isinstance(raw, bytes):
        return raw.decode("utf-8", errors="replace")
    return str(raw)


def _with_env(settings: "dict[str, str]", call: Callable[[], int]) -> int:
    """Runs ``call`` (a C entry point that reads settings from the environment) with
    ``settings`` in the environment, then puts the caller's values back, so that child
    processes do not inherit ours."""
    saved = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)
    try:
        return call()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _check(lib: Any, status: int, function: str) -> None:
    status = int(status)
    if status != GMPROF_OK:
        # Read the thread-local message right away, before any other gmprof call.
        raise GmprofError(status, _decode(lib.gmprof_last_error()), function)


def _encode_name(name: Union[str, bytes], what: str = "name") -> bytes:
    if isinstance(name, str):
        data = name.encode("utf-8")
    elif isinstance(name, (bytes, bytearray)):
        data = bytes(name)
    else:
        raise TypeError("%s must be str, not %s" % (what, type(name).__name__))
    if b"\0" in data:
        raise ValueError("%s must not contain NUL characters: %r" % (what, name))
    return data


def _encode_optional(value: Optional[Union[str, bytes]], what: str) -> Optional[bytes]:
    return None if value is None else _encode_name(value, what)


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------


def is_enabled() -> bool:
    """False when ``GMPROF_DISABLE`` is set to 1/true/yes/on: then every call is a no-op."""
    value = os.environ.get("GMPROF_DISABLE", "").strip().lower()
    return value not in ("1", "true", "yes", "on")


def is_initialized() -> bool:
    """True between a successful :func:`init` and :func:`finish` made through this module."""
    return _initialized


def init(
    mode: Optional[str] = None,
    metrics: Optional[Union[str, Iterable[str]]] = None,
    output_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    device: int = -1,
    synchronize_on_pop: bool = False,
    range_scope: Optional[str] = None,
    pm_sampling: Optional[Union[str, Iterable[str]]] = None,
    pm_interval: Optional[Union[str, int]] = None,
    format: Optional[Union[str, Iterable[str]]] = None,
    pc_sampling: Optional[Union[bool, str, int]] = None,
    trace_format: Optional[str] = None,
    rotate: Optional[Union[int, str]] = None,
    rotate_step: Optional[str] = None,
) -> None:
    """Starts the process-wide profiler (``gmprof_init``).

    Args:
        mode: ``"per_kernel"``, ``"per_range"``, ``"kernel_replay"`` or ``"trace"``; default:
            per_kernel for a one-pass metric set, else kernel_replay;
            ``None`` uses ``$GMPROF_MODE`` or the default.
        metrics: metric names, as a list or a comma-separated string; ``None`` uses
            ``$GMPROF_METRICS`` or the mode's default set.
        output_dir: where :func:`finish` writes; ``None`` uses ``$GMPROF_OUT`` or
            ``"gmprof-out"``. Resolved to an absolute path now.
        device: CUDA device ordinal; -1 uses the current context or device 0.
        synchronize_on_pop: wait for the GPU before each range closes, so that ranges
            cover the GPU work they launched.
        range_scope: ``"process"`` (the default) puts work launched by a thread with no
            open range of its own into the latest range open on any thread, so that the
            kernels PyTorch's autograd thread launches for ``backward`` land in the range the
            training loop opened; ``"thread"`` keeps each thread's work in its own ranges
            (``<root>`` when it has none). ``None`` uses ``$GMPROF_RANGE_SCOPE`` or
            ``"process"``. Passed to the library as ``GMPROF_RANGE_SCOPE`` for the call.
        pm_sampling: also sample PM counters at a fixed interval and fold them into every
            range and kernel (``pm.csv``, no replay; an add-on to ``mode="trace"``):
            ``"default"``, ``"dram"`` (the two DRAM byte rates, which sustain 20 µs) or
            PM-sampling metric names. ``None`` uses
            ``$GMPROF_PM_SAMPLING``. Passed as ``GMPROF_PM_SAMPLING`` for the call.
        pm_interval: the sampling interval, ns (``20000``) or a string such as ``"20us"``
            or ``"30000cycles"``; ``None`` uses ``$GMPROF_PM_INTERVAL`` or 100 µs.
        format: the table formats :func:`finish` writes: ``"csv"``, ``"parquet"`` or both
            (``"csv,parquet"`` or a list; the default). ``None`` uses ``$GMPROF_FORMAT`` or
            both. Passed as ``GMPROF_FORMAT`` for the call.
        pc_sampling: also sample warp program counters with their stall reasons
            (``stalls.csv``, ``pc_samples.csv``; an add-on to ``mode="trace"``): ``True``
            for every 2^13 cycles, or N (5 to 31) for every 2^N cycles, or a string such as
            ``"2^12"``, ``"4096cycles"`` or ``"cupti"`` (CUPTI's interval); ``False`` turns
            it off. ``None`` uses
            ``$GMPROF_PC_SAMPLING``. Passed as ``GMPROF_PC_SAMPLING`` for the call.
        trace_format: the form of ``trace.json``: ``"chrome"`` (gmprof's own, the default) or
            ``"kineto"`` (the form PyTorch's profiler writes, which Holistic Trace Analysis
            reads; the README's "Traces for HTA"). ``None`` uses ``$GMPROF_TRACE_FORMAT`` or
            ``"chrome"``. Passed as ``GMPROF_TRACE_FORMAT`` for the call.
        rotate: per_kernel counters in rotation (mode per_kernel): each step measures one
            block of consecutive launch positions, so every position of a repeating step is
            measured once every N measuring steps, the other launches at trace cost
            (``positions.csv``; the README's "per_kernel in rotation"). ``"auto"`` picks the
            blocks and how often a step measures from the first steps; an int N fixes N.
            ``None`` uses ``$GMPROF_ROTATE`` or no rotation. Passed as ``GMPROF_ROTATE``.
        rotate_step: the range (name or glob, e.g. ``"step"``) whose instances are the steps
            a rotation numbers positions in; ``None`` uses ``$GMPROF_ROTATE_STEP``, then the
            outermost open range. Passed as ``GMPROF_ROTATE_STEP``.

    Raises:
        GmprofError: e.g. ``GMPROF_ERROR_ALREADY_INITIALIZED``,
            ``GMPROF_ERROR_LIBRARY_NOT_FOUND`` (libgmprof, libcupti or libcuda missing),
            ``GMPROF_ERROR_UNKNOWN_METRIC``.
        ValueError / TypeError: an argument is malformed (checked before calling C).
    """
    global _initialized, _output_dir
    if not is_enabled():
        return
    if metrics is not None and not isinstance(metrics, (str, bytes)):
        items = list(metrics)
        for item in items:
            if not isinstance(item, str):
                raise TypeError("metrics must be strings, not %s" % type(item).__name__)
        metrics = ",".join(item.strip() for item in items)
    if output_dir is None:
        output_dir = os.environ.get("GMPROF_OUT") or "gmprof-out"
    resolved_dir = os.path.abspath(os.fspath(output_dir))
    if not isinstance(device, int) or isinstance(device, bool):
        raise TypeError("device must be an int, not %s" % type(device).__name__)
    if range_scope is None:
        range_scope = os.environ.get("GMPROF_RANGE_SCOPE") or "process"
    if range_scope not in ("process", "thread"):
        raise ValueError("range_scope must be 'process' or 'thread', not %r" % (range_scope,))

    if pm_sampling is not None and not isinstance(pm_sampling, str):
        pm_sampling = ",".join(str(item).strip() for item in pm_sampling)
    if pm_interval is not None and not isinstance(pm_interval, (str, int)):
        raise TypeError("pm_interval must be an int (ns) or a string, not %s" % type(pm_interval).__name__)
    if pm_interval is not None and pm_sampling is None and not os.environ.get("GMPROF_PM_SAMPLING"):
        raise ValueError("pm_interval needs pm_sampling")
    if pc_sampling is True:
        pc_sampling = "default"
    elif pc_sampling is False:
        pc_sampling = "off"
    elif pc_sampling is not None and not isinstance(pc_sampling, (str, int)):
        raise TypeError("pc_sampling must be a bool, an int (2^N cycles) or a string, not %s" % type(pc_sampling).__name__)
    elif isinstance(pc_sampling, int) and not 5 <= pc_sampling <= 31:
        raise ValueError("pc_sampling must be from 5 to 31 (every 2^N cycles), not %d" % pc_sampling)
    if format is not None:
        words = format.split(",") if isinstance(format, str) else [str(item) for item in format]
        words = [w.strip().lower() for w in words if w.strip()]
        if not words or any(w not in ("csv", "parquet") for w in words):
            raise ValueError("format must be 'csv', 'parquet' or 'csv,parquet', not %r" % (format,))
        format = ",".join(words)
    if rotate is not None:
        if isinstance(rotate, bool) or not (
            (isinstance(rotate, int) and rotate >= 1) or (isinstance(rotate, str) and rotate.strip() == "auto")
        ):
            raise ValueError("rotate must be 'auto' or a whole number of steps (1 or more), not %r" % (rotate,))
        rotate = str(rotate).strip()
    if rotate_step is not None and not isinstance(rotate_step, str):
        raise TypeError("rotate_step must be a string, not %s" % type(rotate_step).__name__)
    if trace_format is not None:
        if not isinstance(trace_format, str) or trace_format.strip().lower() not in ("chrome", "kineto"):
            raise ValueError("trace_format must be 'chrome' or 'kineto', not %r" % (trace_format,))
        trace_format = trace_format.strip().lower()

    options = GmprofOptions(
        _encode_optional(mode, "mode"),
        _encode_optional(metrics, "metrics"),
        _encode_name(resolved_dir, "output_dir"),
        device,
        1 if synchronize_on_pop else 0,
    )
    lib = _load()
    # The C library reads the scope from the environment during gmprof_init; restore the
    # caller's value afterwards so that child processes do not inherit ours.
    settings = {"GMPROF_RANGE_SCOPE": range_scope}
    if pm_sampling is not None:
        settings["GMPROF_PM_SAMPLING"] = pm_sampling
    if pm_interval is not None:
        settings["GMPROF_PM_INTERVAL"] = str(pm_interval)
    if format is not None:
        settings["GMPROF_FORMAT"] = format
    if pc_sampling is not None:
        settings["GMPROF_PC_SAMPLING"] = str(pc_sampling)
    if trace_format is not None:
        settings["GMPROF_TRACE_FORMAT"] = trace_format
    if rotate is not None:
        settings["GMPROF_ROTATE"] = rotate
    if rotate_step is not None:
        settings["GMPROF_ROTATE_STEP"] = rotate_step
    status = _with_env(settings, lambda: lib.gmprof_init(ctypes.pointer(options)))
    _check(lib, status, "gmprof_init")
    _initialized = True
    # Each process writes into its own directory of output_dir (a rank's, a worker's): the
    # library says which.
    claimed = lib.gmprof_output_dir() if hasattr(lib, "gmprof_output_dir") else None
    _output_dir = os.fsdecode(claimed) if claimed else resolved_dir


def push_range(name: str) -> None:
    """Opens a range named ``name`` on the calling thread (``gmprof_push_range``).

    Raises:
        ValueError: ``name`` contains a NUL character.
        GmprofError: e.g. ``GMPROF_ERROR_NOT_INITIALIZED``.
    """
    if not is_enabled():
        return
    data = _encode_name(name)
    lib = _load()
    _check(lib, lib.gmprof_push_range(data), "gmprof_push_range")


def pop_range() -> None:
    """Closes the calling thread's innermost open range (``gmprof_pop_range``).

    Raises:
        GmprofError: ``GMPROF_ERROR_UNBALANCED`` with no open range on this thread,
            ``GMPROF_ERROR_NOT_INITIALIZED`` without :func:`init`.
    """
    if not is_enabled():
        return
    lib = _load()
    _check(lib, lib.gmprof_pop_range(), "gmprof_pop_range")


def finish() -> Optional[str]:
    """Stops the profiler and writes its outputs (``gmprof_finish``).

    Writes the ranges, kernels, transfers and stats tables (.csv and .parquet; ``GMPROF_FORMAT``
    chooses), report.json and trace.json.

    Returns:
        The absolute output directory, or ``None`` when gmprof is disabled.

    Raises:
        GmprofError: e.g. ``GMPROF_ERROR_NOT_INITIALIZED``, ``GMPROF_ERROR_IO``.
    """
    global _initialized, _output_dir
    if not is_enabled():
        return None
    lib = _load()
    status = lib.gmprof_finish()
    # The C side takes the profiler down whether or not writing succeeded.
    out, _initialized, _output_dir = _output_dir, False, None
    _check(lib, status, "gmprof_finish")
    if out is None:
        out = os.path.abspath(os.environ.get("GMPROF_OUT") or "gmprof-out")
    return out


def version() -> str:
    """The library's version string (``gmprof_version``). Loads the library even when disabled."""
    lib = _load()
    return _decode(lib.gmprof_version())


class _Range:
    """A named range: a context manager and a decorator. Made by :func:`range`."""

    def __init__(self, name: Optional[str]) -> None:
        if name is not None:
            _encode_name(name)  # fail early on NUL or a wrong type
        self.name = name
        # Per-thread stack of "did __enter__ push?" so that one instance can be entered
        # from several threads and recursively.
        self._local = threading.local()

    def _stack(self) -> List[bool]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def __enter__(self) -> "_Range":
        if self.name is None:
            raise TypeError("gmprof.range() needs a name when used as a context manager")
        pushed = is_enabled()
        if pushed:
            push_range(self.name)
        self._stack().append(pushed)
        return self

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> bool:
        stack = self._stack()
        pushed = stack.pop() if stack else False
        if not pushed:
            return False
        if exc is None:
            pop_range()  # errors propagate
            return False
        try:
            pop_range()
        except Exception as pop_err:  # never mask the user's exception
            note = "gmprof: closing range %r failed: %s" % (self.name, pop_err)
            add_note = getattr(exc, "add_note", None)
            if add_note is not None:
                add_note(note)
        return False

    def __call__(self, func: F) -> F:
        name = self.name if self.name is not None else func.__qualname__
        inner = _Range(name)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inner:
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def __repr__(self) -> str:
        return "gmprof.range(%r)" % (self.name,)


@overload
def range(name: str) -> _Range: ...
@overload
def range(name: None = None) -> _Range: ...
@overload
def range(name: F) -> F: ...


def range(name: Any = None) -> Any:  # noqa: A001 - shadows the builtin on purpose
    """A range that is both a context manager and a decorator.

    ::

        with gmprof.range("step"):        # context manager
            ...

        @gmprof.range("forward")          # decorator with a name
        def forward(x): ...

        @gmprof.range                     # decorator named after func.__qualname__
        def backward(loss): ...

    The range is popped even when the block raises; the original exception propagates,
    and a failure to pop during an exception is attached to it as a note rather than
    replacing it. Ranges are per thread. With ``GMPROF_DISABLE=1`` it does nothing.
    """
    if callable(name) and not isinstance(name, (str, bytes)):
        return _Range(None)(name)
    return _Range(name)


from .report import Report, load  # noqa: E402  (pure Python; no library needed)
from ._capture import capture, capture_start, capture_stop  # noqa: E402
from .diff import diff  # noqa: E402  (runs the gmprof command; no library needed)


def __getattr__(name: str) -> Any:
    """``gmprof.torch`` on first use (PEP 562), so that ``import gmprof`` never imports torch."""
    if name == "torch":
        import importlib

        return importlib.import_module(__name__ + ".torch")
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
