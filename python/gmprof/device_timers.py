"""In-kernel region timers (``include/gmprof_device.cuh``) from Python.

A kernel stamps ``%globaltimer`` and ``%smid`` into a buffer at region begins and ends
(CUDA C++ through the header, Triton through :mod:`gmprof.triton_timers`). This module
makes the buffer and decodes it through libgmprof, so there is one decoder::

    import gmprof
    from gmprof.device_timers import DeviceTimers

    gmprof.init(mode="trace")
    timers = DeviceTimers(capacity=1 << 16)          # a torch.int64 tensor on the GPU
    my_kernel[grid](x, y, timers.tensor)              # or pass timers.ptr to a C++ extension
    launch = timers.collect(["", "load", "compute"])  # right after the launch, same thread
    print(launch["spans"]["spans"][0])
    gmprof.finish()                                   # regions.csv, report.json, trace.json

:func:`decode` reads a buffer from a torch tensor, a NumPy array, ``bytes`` or a raw device
pointer (``ptr=..., nbytes=...``). Collected launches join the kernel row of the calling
thread's last profiled launch and go to the outputs :func:`gmprof.finish` writes.
"""

import ctypes
import json
from typing import Any, Dict, List, Optional, Sequence

from . import GmprofError, _check, _encode_name, _load  # noqa: F401

MAGIC = 0x54444D47
VERSION = 1
HEADER_WORDS = 8
RECORD_BYTES = 16


def buffer_bytes(capacity: int) -> int:
    """Bytes of a buffer with room for ``capacity`` records."""
    return HEADER_WORDS * 8 + capacity * RECORD_BYTES


def host_header(capacity: int) -> List[int]:
    """The two header words the host writes before a launch (the rest stays zero)."""
    return [MAGIC | (VERSION << 32) | (HEADER_WORDS << 48), capacity | (RECORD_BYTES << 32)]


def _signed(word: int) -> int:
    return word - (1 << 64) if word >= 1 << 63 else word


def _configure(lib: Any) -> Any:
    if getattr(lib, "_gmprof_dt_configured", False):
        return lib
    status = ctypes.c_int
    lib.gmprof_dt_decode.argtypes = [
        ctypes.c_void_p,
        ctypes.c_ulonglong,
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.c_int,
        ctypes.c_longlong,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_void_p),
    ]
    lib.gmprof_dt_decode.restype = status
    lib.gmprof_dt_read_device.argtypes = [ctypes.c_ulonglong, ctypes.c_void_p, ctypes.c_ulonglong]
    lib.gmprof_dt_read_device.restype = status
    lib.gmprof_dt_last_correlation_id.argtypes = [ctypes.POINTER(ctypes.c_longlong)]
    lib.gmprof_dt_last_correlation_id.restype = status
    lib.gmprof_string_free.argtypes = [ctypes.c_void_p]
    lib.gmprof_string_free.restype = status
    lib._gmprof_dt_configured = True
    return lib


def last_correlation_id() -> Optional[int]:
    """The correlation id of the calling thread's last kernel launch gmprof profiled."""
    lib = _configure(_load())
    out = ctypes.c_longlong(-1)
    _check(lib, lib.gmprof_dt_last_correlation_id(ctypes.byref(out)), "gmprof_dt_last_correlation_id")
    return None if out.value < 0 else out.value


def _host_bytes(data: Any, ptr: Optional[int], nbytes: Optional[int]) -> bytes:
    if ptr is not None:
        if not nbytes:
            raise ValueError("a raw device pointer needs nbytes")
        lib = _configure(_load())
        out = ctypes.create_string_buffer(nbytes)
        _check(lib, lib.gmprof_dt_read_device(ptr, out, nbytes), "gmprof_dt_read_device")
        return out.raw
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if hasattr(data, "detach") and hasattr(data, "cpu"):  # a torch tensor (synchronizes)
        return data.detach().contiguous().cpu().numpy().tobytes()
    if hasattr(data, "tobytes"):  # a NumPy array
        return data.tobytes()
    raise TypeError("decode needs bytes, a NumPy array, a torch tensor or ptr=/nbytes=, not %s" % type(data).__name__)


def decode(
    data: Any = None,
    names: Sequence[str] = (),
    *,
    ptr: Optional[int] = None,
    nbytes: Optional[int] = None,
    correlation_id: Optional[int] = -1,
    tracks: str = "sm",
    submit: bool = False,
) -> Dict[str, Any]:
    """Decodes a timer buffer into a dict (libgmprof's ``TimedLaunch`` as JSON).

    ``data``: a torch tensor, NumPy array or bytes holding the whole buffer; or ``ptr`` and
    ``nbytes``: a device address to copy it from (after a synchronize). ``names``: region
    names by id. ``correlation_id``: -1 (default) the calling thread's last profiled launch,
    ``None`` none, or an id. ``submit``: also hand it to the outputs of :func:`gmprof.finish`.
    """
    raw = _host_bytes(data, ptr, nbytes)
    lib = _configure(_load())
    encoded = [_encode_name(n, "a region name") for n in names]
    array = (ctypes.c_char_p * max(len(encoded), 1))(*encoded)
    out = ctypes.c_void_p()
    cid = -2 if correlation_id is None else int(correlation_id)
    buf = ctypes.create_string_buffer(raw, len(raw))
    status = lib.gmprof_dt_decode(
        buf, len(raw), array, len(encoded), cid, tracks.encode(), 1 if submit else 0, ctypes.byref(out)
    )
    _check(lib, status, "gmprof_dt_decode")
    try:
        return json.loads(ctypes.string_at(out.value).decode("utf-8"))
    finally:
        lib.gmprof_string_free(out)


def durations(launch: Dict[str, Any]) -> Dict[str, List[int]]:
    """Span durations (ns) by region name of a decoded launch."""
    names = launch.get("region_names", [])
    out: Dict[str, List[int]] = {}
    for s in launch["spans"]["spans"]:
        rid = s["region"]
        name = names[rid] if rid < len(names) and names[rid] else "region_%d" % rid
        out.setdefault(name, []).append(s["end_ns"] - s["start_ns"])
    return out


class DeviceTimers:
    """A timer buffer in a torch tensor (``torch.int64``, zeroed, header written)."""

    def __init__(self, capacity: int = 1 << 16, device: Any = "cuda") -> None:
        import torch

        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self.device = device
        host = torch.zeros(buffer_bytes(capacity) // 8, dtype=torch.int64)
        for i, word in enumerate(host_header(capacity)):
            host[i] = _signed(word)
        self._host_image = host
        self.tensor = host.to(device)
        if self.tensor.data_ptr() % 16:
            # The device would flag the buffer and record nothing (records are 16-byte stores).
            raise RuntimeError("device timers: the buffer's address %#x is not 16-byte aligned" % self.tensor.data_ptr())

    @property
    def ptr(self) -> int:
        """The device address to pass to a kernel (``unsigned long long *``)."""
        return int(self.tensor.data_ptr())

    @property
    def nbytes(self) -> int:
        return buffer_bytes(self.capacity)

    def reset(self) -> None:
        """Clears the records and rewrites the header for the next launch."""
        self.tensor.copy_(self._host_image)

    def collect(self, names: Sequence[str] = (), tracks: str = "sm", submit: bool = True) -> Dict[str, Any]:
        """Decodes the buffer as the calling thread's last profiled launch (call it right
        after the launch), hands it to the outputs (``submit``) and clears the buffer."""
        launch = decode(self.tensor, names, correlation_id=-1, tracks=tracks, submit=submit)
        self.reset()
        return launch
