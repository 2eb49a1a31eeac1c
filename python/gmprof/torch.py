"""PyTorch integration: ranges named after the module tree, on a torch.profiler-like schedule.

::

    import gmprof, gmprof.torch

    with gmprof.torch.profile(model, depth=3, mode="per_range",
                              schedule=gmprof.torch.schedule(wait=1, warmup=1, active=3)) as prof:
        for batch in loader:
            loss = model(batch).loss
            loss.backward()
            opt.step(); opt.zero_grad()
            prof.step()
    report = prof.report()        # gmprof.load of the output directory

Ranges, during the schedule's active steps only:

* ``step``: one per active step, from the step's start to the next ``prof.step()``;
* the module tree, through forward pre/post hooks: ``step/GPT``, ``step/GPT/h.3``,
  ``step/GPT/h.3/attn`` -- the root is named after its class, every other module after its
  attribute path from the nearest module that runs a ``forward`` of its own (so the
  ``ModuleList`` ``h`` gives ``h.3``), down to ``depth`` levels;
* the backward pass, through full backward pre/post hooks, on the thread that runs it
  (PyTorch's autograd thread for CUDA tensors): ``step/backward/GPT/h.3/attn``. Each
  backward pass opens ``backward`` at its first hook and closes it, and anything still open
  on that thread, when the pass ends (``queue_callback`` of the autograd engine). With
  gmprof's process range scope (what :func:`profile` initializes with) those ranges nest
  under the range the training loop has open;
* ``torch.profiler.record_function`` / ``torch.autograd.profiler.record_function`` regions,
  under their own names (the library's own ones too, e.g. the DataLoader's);
* ``optimizer.step()`` of any optimizer, as ``<class>.step`` (``AdamW.step``), through the
  global optimizer step hooks; torch's own ``Optimizer.step#...`` record_function region
  around it is then left out.

Outside the active steps no hook is installed and nothing is pushed.

Every range is popped on the thread that pushed it, in reverse order: closing a range closes
the ranges opened above it on its thread first, and ranges a step, a forward that raised or a
backward pass left open are closed at its end. A backward pass that raised is noticed by
wrapping ``torch.autograd.backward``/``grad`` while the profile runs; its ranges are closed on
the calling thread at once, or by the autograd thread's next backward (only that thread can
pop them). ``prof.warnings`` says when something unusual happened.

The ranges go to a *backend*: ``"gmprof"`` (``gmprof.push_range``/``pop_range``, the default),
``"nvtx"`` (``torch.cuda.nvtx.range_push``/``range_pop``, for ``gmprof run`` and other NVTX
tools), ``"record_function"`` (regions in torch.profiler's traces), a list of these, or any object with ``push(name)`` and ``pop()`` such as
:class:`RecordingBackend`, which keeps the sequence for checks without a GPU.
"""

from __future__ import annotations

import functools
import inspect
import threading
import warnings
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import torch

import gmprof as _gmprof

__all__ = ["profile", "schedule", "Schedule", "module_names", "RecordingBackend", "NvtxBackend",
           "RecordFunctionBackend", "GmprofBackend"]

# --------------------------------------------------------------------------------------
# Schedule
# --------------------------------------------------------------------------------------

SKIP, WAIT, WARMUP, ACTIVE, DONE = "skip", "wait", "warmup", "active", "done"


class Schedule:
    """Which steps are active, as torch.profiler.schedule: made by :func:`schedule`.

    After ``skip_first`` steps, cycles of ``wait`` idle steps, ``warmup`` steps and
    ``active`` steps repeat ``repeat`` times (0: for ever). Calling it with a step number
    gives ``"skip"``, ``"wait"``, ``"warmup"``, ``"active"`` or ``"done"``. gmprof needs
    no warm-up (nothing starts per step), so warmup steps push nothing, like wait steps;
    they are accepted so that torch.profiler schedules carry over unchanged.
    """

    def __init__(self, wait: int = 0, warmup: int = 0, active: int = 1, repeat: int = 0, skip_first: int = 0):
        for name, value in (("wait", wait), ("warmup", warmup), ("active", active), ("repeat", repeat),
                            ("skip_first", skip_first)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError("schedule: %s must be an int >= 0, not %r" % (name, value))
        if active < 1:
            raise ValueError("schedule: active must be at least 1")
        self.wait, self.warmup, self.active, self.repeat, self.skip_first = wait, warmup, active, repeat, skip_first

    def __call__(self, step: int) -> str:
        if step < self.skip_first:
            return SKIP
        step -= self.skip_first
        cycle = self.wait + self.warmup + self.active
        if self.repeat and step // cycle >= self.repeat:
            return DONE
        position = step % cycle
        if position < self.wait:
            return WAIT
        if position < self.wait + self.warmup:
            return WARMUP
        return ACTIVE

    def __repr__(self) -> str:
        return "gmprof.torch.schedule(wait=%d, warmup=%d, active=%d, repeat=%d, skip_first=%d)" % (
            self.wait, self.warmup, self.active, self.repeat, self.skip_first)


def schedule(wait: int = 0, warmup: int = 0, active: int = 1, repeat: int = 0, skip_first: int = 0) -> Schedule:
    """A :class:`Schedule`: ``wait``, ``warmup``, ``active`` steps, ``repeat`` times (0: for ever)."""
    return Schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)


def _is_active(action: Any) -> bool:
    """Our schedule's strings, or torch.profiler's ProfilerAction (RECORD, RECORD_AND_SAVE)."""
    if isinstance(action, str):
        if action not in (SKIP, WAIT, WARMUP, ACTIVE, DONE):
            raise ValueError("schedule returned %r" % (action,))
        return action == ACTIVE
    name = getattr(action, "name", None)
    if name in ("NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE"):
        return name in ("RECORD", "RECORD_AND_SAVE")
    raise ValueError("schedule returned %r: expected gmprof.torch.schedule's strings or a ProfilerAction" % (action,))


# --------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------


class GmprofBackend:
    """Ranges through :func:`gmprof.push_range` / :func:`gmprof.pop_range`."""

    def push(self, name: str) -> None:
        _gmprof.push_range(name)

    def pop(self) -> None:
        _gmprof.pop_range()


class NvtxBackend:
    """Ranges through ``torch.cuda.nvtx.range_push`` / ``range_pop``."""

    def push(self, name: str) -> None:
        torch.cuda.nvtx.range_push(name)

    def pop(self) -> None:
        torch.cuda.nvtx.range_pop()


class RecordingBackend:
    """Records every push and pop, per thread, for checks without a GPU.

    ``events`` holds ``(thread_id, "push", path)`` and ``(thread_id, "pop", path)`` tuples in
    call order. Paths nest as gmprof's process range scope nests them: inside the calling
    thread's innermost open range, or, for a thread with none open, inside the latest range
    open on any thread. ``pushed`` lists the paths in push order; ``open`` maps each thread
    to its open paths; a pop with nothing open on the thread is counted in ``unbalanced``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: List[Tuple[int, str, str]] = []
        self.open: Dict[int, List[Tuple[int, str]]] = {}
        self.unbalanced = 0
        self._serial = 0

    def push(self, name: str) -> None:
        thread = threading.get_ident()
        with self._lock:
            stack = self.open.setdefault(thread, [])
            if stack:
                parent: Optional[str] = stack[-1][1]
            else:
                latest = max((s[-1] for s in self.open.values() if s), default=None)
                parent = latest[1] if latest else None
            path = name if parent is None else parent + "/" + name
            self._serial += 1
            stack.append((self._serial, path))
            self.events.append((thread, "push", path))

    def pop(self) -> None:
        thread = threading.get_ident()
        with self._lock:
            stack = self.open.get(thread)
            if not stack:
                self.unbalanced += 1
                self.events.append((thread, "pop", ""))
                return
            self.events.append((thread, "pop", stack.pop()[1]))

    @property
    def pushed(self) -> List[str]:
        return [path for _, kind, path in self.events if kind == "push"]

    def open_paths(self) -> List[str]:
        """Paths still open on any thread."""
        with self._lock:
            return [path for stack in self.open.values() for _, path in stack]


class RecordFunctionBackend:
    """Ranges as torch.profiler regions (what ``record_function`` records), per thread.

    They show in torch.profiler's traces and tables: the module tree under torch's own
    profiler, or gmprof.torch's ranges next to torch.profiler's kernels for comparison.
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def push(self, name: str) -> None:
        handle = torch.ops.profiler._record_function_enter_new(name, None)
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        stack.append(handle)

    def pop(self) -> None:
        stack = getattr(self._local, "stack", None)
        if not stack:
            raise RuntimeError("record_function backend: pop with no open region on this thread")
        handle = stack.pop()
        with torch._C.DisableTorchFunctionSubclass():
            torch.ops.profiler._record_function_exit._RecordFunction(handle)


class _MultiBackend:
    def __init__(self, backends: Sequence[Any]) -> None:
        self.backends = list(backends)

    def push(self, name: str) -> None:
        done = []
        try:
            for backend in self.backends:
                backend.push(name)
                done.append(backend)
        except BaseException:
            for backend in reversed(done):  # keep every backend balanced
                backend.pop()
            raise

    def pop(self) -> None:
        error: Optional[BaseException] = None
        for backend in reversed(self.backends):
            try:
                backend.pop()
            except Exception as err:  # pop the others all the same
                error = error or err
        if error is not None:
            raise error


def _backend(spec: Any) -> Any:
    if spec == "gmprof":
        return GmprofBackend()
    if spec == "nvtx":
        return NvtxBackend()
    if spec == "record_function":
        return RecordFunctionBackend()
    if isinstance(spec, (list, tuple)):
        return _MultiBackend([_backend(s) for s in spec])
    if callable(getattr(spec, "push", None)) and callable(getattr(spec, "pop", None)):
        return spec
    raise ValueError("backend must be 'gmprof', 'nvtx', 'record_function', a list of them, "
                     "or an object with push(name) and pop()")


def _uses_gmprof(backend: Any) -> bool:
    if isinstance(backend, GmprofBackend):
        return True
    return isinstance(backend, _MultiBackend) and any(_uses_gmprof(b) for b in backend.backends)


# --------------------------------------------------------------------------------------
# Open ranges, per thread
# --------------------------------------------------------------------------------------

_STEP, _FORWARD, _BACKWARD_PASS, _BACKWARD, _RECORD, _OPTIMIZER = range(6)


class _Entry:
    __slots__ = ("name", "kind", "key", "qualname", "thread", "open", "done", "failures")

    def __init__(self, name: str, kind: int, key: Any, qualname: Optional[str], thread: "_Thread") -> None:
        self.name = name
        self.kind = kind
        self.key = key
        self.qualname = qualname
        self.thread = thread
        self.open = True
        # Module backward: its hook came with no input gradients (no input required
        # grad), so the module's own backward work is still to come: close it later.
        # Backward pass: the pass ended on another thread.
        self.done = False
        # Backward pass: the profile's count of failed backward calls when it opened.
        self.failures = 0


class _Thread:
    """A thread's open ranges, innermost last."""

    __slots__ = ("ident", "stack", "passes")

    def __init__(self) -> None:
        self.ident = threading.get_ident()
        self.stack: List[_Entry] = []
        # The backward passes with a `backward` range open on this thread, outermost first,
        # as (graph task id, entry): more than one while a backward runs inside a backward
        # (reentrant activation checkpointing).
        self.passes: List[Tuple[Any, _Entry]] = []


def _is_ancestor(outer: Optional[str], inner: Optional[str]) -> bool:
    """Whether module qualname ``outer`` contains ``inner`` ("" is the root)."""
    if outer is None or inner is None:
        return False
    return outer == "" or inner == outer or inner.startswith(outer + ".")


def _has_forward(module: "torch.nn.Module") -> bool:
    """False for containers that never run (ModuleList, ModuleDict): no forward of their own."""
    return type(module).forward is not torch.nn.Module.forward


def module_names(model: "torch.nn.Module", depth: Optional[int] = 3,
                 name: Optional[str] = None) -> List[Tuple["torch.nn.Module", str, str]]:
    """The modules :func:`profile` names, as ``(module, range name, qualified name)``.

    The root is named ``name`` or its class name. A module's range name is its attribute
    path from the nearest ancestor that runs a forward of its own (``h.3`` below a
    ``ModuleList`` ``h``). ``depth`` limits the levels (root = 1; ``None``: all). A module
    reachable twice is named at its first place, as ``named_modules`` lists it.
    """
    if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool) or depth < 0):
        raise ValueError("depth must be an int >= 0 or None, not %r" % (depth,))
    out: List[Tuple[torch.nn.Module, str, str]] = []
    seen = set()

    def walk(module: torch.nn.Module, qualname: str, relative: str, level: int) -> None:
        if id(module) in seen:
            return
        seen.add(id(module))
        if _has_forward(module):
            level += 1
            if depth is not None and level > depth:
                return
            out.append((module, relative, qualname))
            prefix = ""
        else:
            prefix = relative + "."
        for child_name, child in module.named_children():
            child_qualname = qualname + "." + child_name if qualname else child_name
            walk(child, child_qualname, prefix + child_name, level)

    walk(model, "", name or type(model).__name__, 0)
    return out


def _graph_task_id() -> Any:
    getter = getattr(torch._C, "_current_graph_task_id", None)
    if getter is None:
        return None
    try:
        return getter()
    except Exception:
        return None


def _forward_hook_takes_always_call() -> bool:
    try:
        return "always_call" in inspect.signature(torch.nn.Module.register_forward_hook).parameters
    except (TypeError, ValueError):
        return False


_ALWAYS_CALL = _forward_hook_takes_always_call()
_TORCH_OPTIMIZER_REGION = "Optimizer.step#"
_HOOK_WARNING = "Full backward hook is firing when gradients are computed with respect to module outputs"

# The profile whose record_function patch is in place (one at a time).
_current: Optional["profile"] = None
_current_lock = threading.Lock()


# --------------------------------------------------------------------------------------
# The profile
# --------------------------------------------------------------------------------------


class profile:  # noqa: N801 - named like torch.profiler.profile
    """Profiles ``model`` with gmprof: a context manager, stepped with :meth:`step`.

    Args:
        model: a ``torch.nn.Module`` (or ``None``: step, record_function and optimizer
            ranges only).
        depth: module levels named (the root is 1; ``None``: all; 0: none). Default 3.
        schedule: a :func:`schedule`, or torch.profiler.schedule(...), or any callable from a
            step number to an action; ``None``: every step is active.
        mode, metrics, output_dir, synchronize_on_pop, rotate: for :func:`gmprof.init`, which the
            profile calls on entry (with ``range_scope="process"``) when the backend is
            gmprof and gmprof is not initialized yet; it then calls :func:`gmprof.finish` on
            exit and keeps the directory in ``output_dir``. An initialized gmprof is used
            as it is and left running.
        name: the root module's range name (default: its class name).
        backward: hook the backward pass too (full backward hooks). Autograd refuses
            those hooks on a module whose output is then modified in place; set ``False``
            or a smaller ``depth`` for such models.
        record_functions: record_function regions as ranges.
        optimizer: ``optimizer.step()`` as a range (global optimizer step hooks).
        step_range: the per-step range's name; ``None`` for none.
        backend: ``"gmprof"``, ``"nvtx"``, ``"record_function"``, a list of them, or an
            object with ``push(name)`` and ``pop()`` (see :class:`RecordingBackend`).
    """

    def __init__(
        self,
        model: Optional["torch.nn.Module"] = None,
        depth: Optional[int] = 3,
        schedule: Optional[Callable[[int], Any]] = None,
        mode: Optional[str] = None,
        metrics: Optional[Union[str, Iterable[str]]] = None,
        output_dir: Optional[str] = None,
        synchronize_on_pop: bool = False,
        name: Optional[str] = None,
        backward: bool = True,
        record_functions: bool = True,
        optimizer: bool = True,
        step_range: Optional[str] = "step",
        backend: Any = "gmprof",
        rotate: Optional[Union[int, str]] = None,
    ) -> None:
        if model is not None and not isinstance(model, torch.nn.Module):
            raise TypeError("model must be a torch.nn.Module or None, not %s" % type(model).__name__)
        if schedule is not None and not callable(schedule):
            raise TypeError("schedule must be callable (gmprof.torch.schedule(...))")
        if step_range is not None:
            _gmprof._encode_name(step_range, "step_range")
        self.model = model
        self.depth = depth
        self.schedule = schedule
        self.backend = _backend(backend)
        self.backward = backward
        self.record_functions = record_functions
        self.optimizer = optimizer
        self.step_range = step_range
        self._init_args = dict(mode=mode, metrics=metrics, output_dir=output_dir,
                               synchronize_on_pop=synchronize_on_pop)
        if rotate is not None:
            # Positions are numbered in the profile's step range.
            self._init_args.update(rotate=rotate, rotate_step=step_range)
        self._modules = module_names(model, depth, name) if model is not None else []
        for _, range_name, _ in self._modules:
            _gmprof._encode_name(range_name, "module name")
        self.step_num = 0
        self.active = False
        self.output_dir: Optional[str] = None
        self.warnings: List[str] = []
        self.errors: List[BaseException] = []
        self.ranges_pushed = 0
        self._owns_session = False
        self._entered = False
        self._handles: List[Any] = []
        self._local = threading.local()
        self._threads: List[_Thread] = []
        self._threads_lock = threading.Lock()
        self._step_entry: Optional[_Entry] = None
        self._saved_record_function: Optional[Tuple[Any, Any]] = None
        self._warning_filter: Any = None
        self._saved_autograd: Optional[Tuple[Any, Any]] = None
        self._failures = 0

    # ---- context manager and steps -------------------------------------------------

    def __enter__(self) -> "profile":
        global _current
        if self._entered:
            raise RuntimeError("gmprof.torch.profile is not reentrant")
        with _current_lock:
            if _current is not None:
                raise RuntimeError("another gmprof.torch.profile is running")
            _current = self
        try:
            if _uses_gmprof(self.backend) and _gmprof.is_enabled() and not _gmprof.is_initialized():
                _gmprof.init(range_scope="process", **self._init_args)
                self._owns_session = True
            if self.record_functions:
                self._patch_record_function()
            if self.backward:
                self._patch_autograd()
            # Our full backward hooks on a module whose inputs need no gradient (the root of a
            # model fed token ids, an embedding) make torch warn on every backward; we expect
            # that case (module backward ranges close later), so the warning says nothing.
            warnings.filterwarnings("ignore", message=_HOOK_WARNING, category=UserWarning)
            self._warning_filter = warnings.filters[0]
        except BaseException:
            self._unpatch_record_function()
            self._unpatch_autograd()
            with _current_lock:
                _current = None
            raise
        self._entered = True
        self._enter_step()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        global _current
        try:
            self._leave_step()
            self._deactivate()
            self._close_thread(self._thread())
            with self._threads_lock:
                left = [e for t in self._threads for e in t.stack if e.open]
            if left:
                self._warn("%d range(s) still open on other threads at the end: %s"
                           % (len(left), ", ".join(e.name for e in left)))
        finally:
            self._unpatch_record_function()
            self._unpatch_autograd()
            if self._warning_filter is not None:
                try:
                    warnings.filters.remove(self._warning_filter)
                    getattr(warnings, "_filters_mutated", lambda: None)()
                except ValueError:
                    pass
                self._warning_filter = None
            self._entered = False
            with _current_lock:
                if _current is self:
                    _current = None
            if self._owns_session:
                self._owns_session = False
                if exc_type is None:
                    self.output_dir = _gmprof.finish()
                else:
                    try:
                        self.output_dir = _gmprof.finish()
                    except Exception as err:  # never mask the user's exception
                        add_note = getattr(exc, "add_note", None)
                        if add_note is not None:
                            add_note("gmprof: finish failed: %s" % err)
        return False

    def start(self) -> "profile":
        """As entering the ``with`` block."""
        return self.__enter__()

    def stop(self) -> None:
        """As leaving the ``with`` block."""
        self.__exit__(None, None, None)

    def step(self) -> None:
        """Ends the current step and starts the next one (call it once per iteration)."""
        if not self._entered:
            raise RuntimeError("gmprof.torch.profile.step() outside the profile")
        self._leave_step()
        self.step_num += 1
        self._enter_step()

    def report(self, pandas: Optional[bool] = None) -> "_gmprof.Report":
        """:func:`gmprof.load` of the output directory (after the profile ended)."""
        if self.output_dir is None:
            raise RuntimeError("no output directory: the profile did not run gmprof.init/finish itself")
        return _gmprof.load(self.output_dir, pandas=pandas)

    def _enter_step(self) -> None:
        active = _is_active(self.schedule(self.step_num)) if self.schedule is not None else True
        if active and not self.active:
            self._activate()
        elif not active and self.active:
            self._deactivate()
        if active and self.step_range is not None:
            self._step_entry = self._push(self._thread(), self.step_range, _STEP)

    def _leave_step(self) -> None:
        entry, self._step_entry = self._step_entry, None
        if entry is not None:
            if entry.thread is not self._thread():
                self._warn("prof.step() on another thread than the step range's")
                return
            self._close(entry)

    # ---- pushing and popping -------------------------------------------------------

    def _warn(self, text: str) -> None:
        self.warnings.append(text)
        warnings.warn("gmprof.torch: " + text, RuntimeWarning, stacklevel=3)

    def _thread(self) -> _Thread:
        state = getattr(self._local, "state", None)
        if state is None:
            state = self._local.state = _Thread()
            with self._threads_lock:
                self._threads.append(state)
        return state

    def _push(self, thread: _Thread, name: str, kind: int, key: Any = None,
              qualname: Optional[str] = None) -> Optional[_Entry]:
        try:
            self.backend.push(name)
        except Exception as err:
            self.errors.append(err)
            if len(self.errors) == 1:
                self._warn("push of %r failed (later failures are only counted in prof.errors): %s" % (name, err))
            return None
        entry = _Entry(name, kind, key, qualname, thread)
        thread.stack.append(entry)
        self.ranges_pushed += 1
        return entry

    def _close(self, entry: _Entry) -> None:
        """Pops ``entry`` and everything opened above it on its thread (innermost first).

        Only on ``entry``'s own thread; an entry already closed is left alone.
        """
        if not entry.open:
            return
        stack = entry.thread.stack
        while stack:
            top = stack.pop()
            top.open = False
            try:
                self.backend.pop()
            except Exception as err:
                self.errors.append(err)
                if len(self.errors) == 1:
                    self._warn("pop of %r failed (later failures are only counted in prof.errors): %s"
                               % (top.name, err))
            if top is entry:
                return

    def _close_thread(self, thread: _Thread) -> None:
        if thread.stack:
            self._close(thread.stack[0])

    @staticmethod
    def _innermost(thread: _Thread, kind: int, key: Any) -> Optional[_Entry]:
        for entry in reversed(thread.stack):
            if entry.kind == kind and entry.key is key:
                return entry
        return None

    # ---- hooks ---------------------------------------------------------------------

    def _activate(self) -> None:
        self.active = True
        handles = self._handles
        for module, range_name, qualname in self._modules:
            handles.append(module.register_forward_pre_hook(self._forward_pre(module, range_name)))
            if _ALWAYS_CALL:
                handles.append(module.register_forward_hook(self._forward_post(module), always_call=True))
            else:
                handles.append(module.register_forward_hook(self._forward_post(module)))
            if self.backward:
                handles.append(module.register_full_backward_pre_hook(
                    self._backward_pre(module, range_name, qualname)))
                handles.append(module.register_full_backward_hook(self._backward_post(module)))
        if self.optimizer:
            from torch.optim.optimizer import (register_optimizer_step_post_hook,
                                               register_optimizer_step_pre_hook)
            handles.append(register_optimizer_step_pre_hook(self._optimizer_pre))
            handles.append(register_optimizer_step_post_hook(self._optimizer_post))

    def _deactivate(self) -> None:
        self.active = False
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.remove()

    def _forward_pre(self, module: Any, range_name: str) -> Callable[..., None]:
        def hook(_module: Any, _args: Any) -> None:
            self._push(self._thread(), range_name, _FORWARD, module)
        return hook

    def _forward_post(self, module: Any) -> Callable[..., None]:
        def hook(_module: Any, _args: Any, _output: Any) -> None:
            entry = self._innermost(self._thread(), _FORWARD, module)
            if entry is not None:
                self._close(entry)
        return hook

    def _backward_pre(self, module: Any, range_name: str, qualname: str) -> Callable[..., None]:
        def hook(_module: Any, _grad_output: Any) -> None:
            thread = self._thread()
            self._begin_backward(thread)
            stack = thread.stack
            # A module whose backward hook came early (no input needed a gradient) ran its
            # backward work since; the next module outside it ends it.
            while stack and stack[-1].kind == _BACKWARD and stack[-1].done \
                    and not _is_ancestor(stack[-1].qualname, qualname):
                self._close(stack[-1])
            self._push(thread, range_name, _BACKWARD, module, qualname)
        return hook

    def _backward_post(self, module: Any) -> Callable[..., None]:
        def hook(_module: Any, grad_input: Any, _grad_output: Any) -> None:
            entry = self._innermost(self._thread(), _BACKWARD, module)
            if entry is None:
                return
            if all(g is None for g in grad_input):
                entry.done = True
            else:
                self._close(entry)
        return hook

    def _begin_backward(self, thread: _Thread) -> None:
        """Opens this backward pass's ``backward`` range on this thread, once per pass.

        A pass inside the running one (a backward called from a backward, as reentrant
        activation checkpointing does) nests its own ``backward`` range. Ranges of a pass
        that failed (``torch.autograd.backward``/``grad`` raised since it opened) or that
        ended on another thread are closed first.
        """
        task = _graph_task_id()
        passes = thread.passes
        while passes and not passes[-1][1].open:
            passes.pop()  # ended: its end-of-pass callback closed it
        if passes:
            outer = passes[0][1]
            if any(e.done or e.failures < self._failures for _, e in passes):
                self._close(outer)
                passes.clear()
            elif task is None or task == passes[-1][0]:
                return
            else:
                for i, (t, _) in enumerate(passes):
                    if t == task:  # back in an outer pass: the inner ones have ended
                        self._close(passes[i + 1][1])
                        del passes[i + 1:]
                        return
        entry = self._push(thread, "backward", _BACKWARD_PASS)
        if entry is None:
            return
        entry.failures = self._failures
        passes.append((task, entry))

        def end_of_pass() -> None:
            try:
                if threading.get_ident() == thread.ident:
                    self._close(entry)
                elif entry.open:
                    entry.done = True  # closed by its thread's next backward hook
                    self._warn("a backward pass ended on another thread than its hooks ran on; "
                               "its ranges stay open until that thread's next backward")
            except Exception as err:  # never fail the backward pass
                self.errors.append(err)

        try:
            torch.autograd.Variable._execution_engine.queue_callback(end_of_pass)
        except Exception as err:
            self.errors.append(err)
            self._warn("cannot hook the end of the backward pass: %s" % err)

    def _backward_failed(self) -> None:
        """``torch.autograd.backward``/``grad`` raised: the passes open now will not end."""
        self._failures += 1
        thread = self._thread()
        if thread.passes:  # this thread's (the CPU case): close them now
            self._close(thread.passes[0][1])
            thread.passes.clear()

    def _patch_autograd(self) -> None:
        """Wraps ``torch.autograd.backward`` and ``grad`` to notice a failed pass, whose
        end-of-pass callback never runs (``loss.backward()`` calls the former)."""
        saved = (torch.autograd.backward, torch.autograd.grad)
        self._saved_autograd = saved

        def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                try:
                    return fn(*args, **kwargs)
                except BaseException:
                    prof = _current
                    if prof is not None:
                        try:
                            prof._backward_failed()
                        except Exception as err:  # never mask the user's exception
                            prof.errors.append(err)
                    raise
            return wrapper

        torch.autograd.backward, torch.autograd.grad = wrap(saved[0]), wrap(saved[1])

    def _unpatch_autograd(self) -> None:
        saved, self._saved_autograd = self._saved_autograd, None
        if saved is not None:
            torch.autograd.backward, torch.autograd.grad = saved

    def _optimizer_pre(self, optimizer: Any, _args: Any, _kwargs: Any) -> None:
        self._push(self._thread(), type(optimizer).__name__ + ".step", _OPTIMIZER, optimizer)

    def _optimizer_post(self, optimizer: Any, _args: Any, _kwargs: Any) -> None:
        entry = self._innermost(self._thread(), _OPTIMIZER, optimizer)
        if entry is not None:
            self._close(entry)

    # ---- record_function -----------------------------------------------------------

    def _patch_record_function(self) -> None:
        cls = torch.autograd.profiler.record_function
        enter, exit_ = cls.__enter__, cls.__exit__
        self._saved_record_function = (enter, exit_)

        def patched_enter(rf: Any) -> Any:
            result = enter(rf)
            prof = _current
            if prof is not None and prof.active:
                name = getattr(rf, "name", None)
                if isinstance(name, str) and not (prof.optimizer and name.startswith(_TORCH_OPTIMIZER_REGION)):
                    try:
                        _gmprof._encode_name(name)
                    except ValueError:
                        return result
                    rf.__dict__["_gmprof_entry"] = prof._push(prof._thread(), name, _RECORD, rf)
            return result

        def patched_exit(rf: Any, *exc: Any) -> Any:
            entry = rf.__dict__.pop("_gmprof_entry", None)
            if entry is not None and _current is not None and entry.thread is _current._thread():
                _current._close(entry)
            return exit_(rf, *exc)

        cls.__enter__, cls.__exit__ = patched_enter, patched_exit

    def _unpatch_record_function(self) -> None:
        saved, self._saved_record_function = self._saved_record_function, None
        if saved is not None:
            cls = torch.autograd.profiler.record_function
            cls.__enter__, cls.__exit__ = saved

    def __repr__(self) -> str:
        return "gmprof.torch.profile(step=%d, active=%s, modules=%d)" % (self.step_num, self.active,
                                                                          len(self._modules))
