"""Captures: profile a window the program chooses (``gmprof.capture``).

Under ``gmprof run --on-demand`` (or ``--capture-range``) the program runs with gmprof injected
and idle; a capture is the run's next ``DIR/capture-K/<process>/``, exactly as one that
``gmprof capture`` asks for, and it starts on the calling thread. Outside ``gmprof run`` a
capture is a profiling session of its own, written to ``output_dir/capture-K/<process>/``::

    import gmprof

    for step in range(steps):
        if step == 1000:
            with gmprof.capture(mode="per_kernel") as c:
                train_step()
            print("profiled step 1000 into", c.output_dir)
        else:
            train_step()

One capture at a time: starting one while another runs (or while ``gmprof capture`` has one
armed) raises :class:`gmprof.GmprofError` saying which.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from typing import Any, Callable, Iterable, Optional, TypeVar, Union

F = TypeVar("F", bound=Callable[..., Any])


def _gmprof() -> Any:
    """The gmprof package (imported whole by the time a capture is asked for)."""
    return sys.modules[__package__]


def capture_start(
    mode: Optional[str] = None,
    metrics: Optional[Union[str, Iterable[str]]] = None,
    output_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    pm_sampling: Optional[Union[str, Iterable[str]]] = None,
    pm_interval: Optional[Union[str, int]] = None,
) -> None:
    """Starts a capture on the calling thread (``gmprof_capture_start``).

    Args:
        mode: ``"trace"``, ``"per_kernel"``, ``"per_range"`` or ``"kernel_replay"``; ``None``:
            the run's ``--mode`` (trace by default) under ``gmprof run``, else the library's.
        metrics: metric names, a list or a comma-separated string; ``None``: the run's.
        output_dir: outside ``gmprof run``, where ``capture-K/`` goes (default ``$GMPROF_OUT``
            or ``gmprof-out``); under ``gmprof run`` captures go to the run's directory.
        pm_sampling, pm_interval: PM sampling, as for :func:`gmprof.init`.

    Raises:
        GmprofError: a capture is running already, or it could not start.
    """
    g = _gmprof()
    if not g.is_enabled():
        return
    if metrics is not None and not isinstance(metrics, (str, bytes)):
        metrics = ",".join(str(m).strip() for m in metrics)
    if pm_sampling is not None and not isinstance(pm_sampling, str):
        pm_sampling = ",".join(str(m).strip() for m in pm_sampling)
    if pm_interval is not None and pm_sampling is None and not os.environ.get("GMPROF_PM_SAMPLING"):
        raise ValueError("pm_interval needs pm_sampling")
    if output_dir is None:
        output_dir = os.environ.get("GMPROF_OUT") or "gmprof-out"
    options = g.GmprofOptions(
        g._encode_optional(mode, "mode"),
        g._encode_optional(metrics, "metrics"),
        g._encode_name(os.path.abspath(os.fspath(output_dir)), "output_dir"),
        -1,
        0,
    )
    lib = g._load()
    if not hasattr(lib, "gmprof_capture_start"):
        raise g.GmprofError(g.GMPROF_ERROR_LIBRARY_NOT_FOUND, "this libgmprof has no captures: rebuild it")
    settings = {"GMPROF_RANGE_SCOPE": os.environ.get("GMPROF_RANGE_SCOPE") or "process"}
    if pm_sampling is not None:
        settings["GMPROF_PM_SAMPLING"] = pm_sampling
    if pm_interval is not None:
        settings["GMPROF_PM_INTERVAL"] = str(pm_interval)
    status = g._with_env(settings, lambda: lib.gmprof_capture_start(ctypes.pointer(options)))
    g._check(lib, status, "gmprof_capture_start")


def capture_stop() -> Optional[str]:
    """Ends the capture :func:`capture_start` started and writes it (``gmprof_capture_stop``).

    Returns:
        The capture's directory (``.../capture-K/<process>``), or ``None`` when gmprof is disabled.
    """
    g = _gmprof()
    if not g.is_enabled():
        return None
    lib = g._load()
    g._check(lib, lib.gmprof_capture_stop(), "gmprof_capture_stop")
    claimed = lib.gmprof_output_dir() if hasattr(lib, "gmprof_output_dir") else None
    return os.fsdecode(claimed) if claimed else None


class Capture:
    """A capture as a context manager and a decorator; made by :func:`capture`."""

    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        self.output_dir: Optional[str] = None

    def __enter__(self) -> "Capture":
        capture_start(**self.settings)
        return self

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> bool:
        if exc is None:
            self.output_dir = capture_stop()
            return False
        try:
            self.output_dir = capture_stop()
        except Exception as stop_err:  # never mask the user's exception
            add_note = getattr(exc, "add_note", None)
            if add_note is not None:
                add_note("gmprof: stopping the capture failed: %s" % stop_err)
        return False

    def __call__(self, func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with Capture(**self.settings):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def __repr__(self) -> str:
        return "gmprof.capture(%s)" % ", ".join("%s=%r" % kv for kv in sorted(self.settings.items()))


def capture(
    mode: Optional[str] = None,
    metrics: Optional[Union[str, Iterable[str]]] = None,
    output_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    pm_sampling: Optional[Union[str, Iterable[str]]] = None,
    pm_interval: Optional[Union[str, int]] = None,
) -> Capture:
    """A capture of a block (``with gmprof.capture(): ...``) or of each call of a function
    (``@gmprof.capture(mode="per_kernel")``); see :func:`capture_start` for the arguments.
    After the block, ``.output_dir`` is the capture's directory."""
    return Capture(mode=mode, metrics=metrics, output_dir=output_dir, pm_sampling=pm_sampling, pm_interval=pm_interval)
