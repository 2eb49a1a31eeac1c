"""gmprof's step ranges for unmodified PyTorch training scripts (``gmprof run --torch-steps``).

``gmprof run --torch-steps[=NAME]`` puts this file's directory first on ``PYTHONPATH`` and sets
``GMPROF_TORCH_STEPS=NAME`` (default ``step``), so every Python process of the run (torchrun's
workers included) imports it at start-up. It imports nothing heavy: when the script itself
imports ``torch.optim.optimizer``, it wraps the function through which every optimizer's ``step``
is profiled (``Optimizer.profile_hook_step``), so that after every step of the first optimizer
that steps the open NVTX range ``NAME`` is closed and the next one opened, *after* the step has
returned: outside the ``Optimizer.step#...`` range that torch's profiler (and
``torch.autograd.profiler.emit_nvtx``) opens around the step, so the step ranges and torch's own
nest properly. (An optimizer step post-hook runs inside that range: a step range opened there
would be closed by torch's pop. The post-hook is the fallback where torch has no
``profile_hook_step``.) So each training iteration after the first is one range, whatever the
script looks like;
the first (compilation, warm-up) stays outside, and the last runs until the program ends (its
range is closed at exit). An iteration whose step the script skips (GradScaler after an
overflow) joins the next range.

The ranges are NVTX ranges pushed through ``torch.cuda.nvtx``, which ``gmprof run`` follows like
any other NVTX range. A ``sitecustomize`` of the environment's own, further on ``sys.path``,
still runs after this one.
"""

import atexit
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_ENV = "GMPROF_TORCH_STEPS"
_MODULE = "torch.optim.optimizer"


class _StepRanges:
    """One NVTX range per optimizer step interval, on the thread that steps."""

    def __init__(self, name):
        self.name = name
        self.owner = None
        self.open = False

    def after_step(self, optimizer, _args, _kwargs):
        if self.owner is None:
            self.owner = id(optimizer)
        if id(optimizer) != self.owner:
            return
        import torch.cuda.nvtx as nvtx

        if self.open:
            nvtx.range_pop()
        nvtx.range_push(self.name)
        self.open = True

    def close(self):
        if self.open:
            import torch.cuda.nvtx as nvtx

            nvtx.range_pop()
            self.open = False


class _AfterOptimizerImport(importlib.abc.MetaPathFinder):
    """Registers the step hook once ``torch.optim.optimizer`` has been executed."""

    def __init__(self, ranges):
        self.ranges = ranges

    def find_spec(self, name, path, target=None):
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module
        ranges = self.ranges

        def exec_then_hook(module):
            exec_module(module)
            _hook(module, ranges)

        loader.exec_module = exec_then_hook
        return spec


def _hook(module, ranges):
    """Marks the step ranges of ``torch.optim.optimizer`` (``module``): after every step returns,
    through the wrapper every ``Optimizer.step`` is patched with, else with a step post-hook."""
    try:
        optimizer = getattr(module, "Optimizer", None)
        inner = getattr(optimizer, "profile_hook_step", None)
        if callable(inner):

            def profile_hook_step(func):
                profiled = inner(func)

                @functools.wraps(profiled)
                def step_then_mark(*args, **kwargs):
                    out = profiled(*args, **kwargs)
                    if args:
                        ranges.after_step(args[0], args[1:], kwargs)
                    return out

                return step_then_mark

            optimizer.profile_hook_step = staticmethod(profile_hook_step)
        else:
            module.register_optimizer_step_post_hook(ranges.after_step)
        atexit.register(ranges.close)
    except Exception as e:  # noqa: BLE001 - a profiler aid must never break the program
        sys.stderr.write("gmprof: --torch-steps: could not hook the optimizer: %s\n" % e)


def _install():
    name = os.environ.get(_ENV, "").strip()
    if not name:
        return
    ranges = _StepRanges(name)
    if _MODULE in sys.modules:
        _hook(sys.modules[_MODULE], ranges)
    else:
        sys.meta_path.insert(0, _AfterOptimizerImport(ranges))


def _chain():
    """Runs the next ``sitecustomize`` on ``sys.path``, which this one shadows."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_install()
_chain()
