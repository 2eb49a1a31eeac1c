"""Tests for ``gmprof run --torch-steps``'s start-up file (gmprof/_bootstrap/sitecustomize.py),
on the CPU: an unmodified training script run with it first on PYTHONPATH gets one NVTX range
per optimizer step interval, and the environment's own sitecustomize still runs.

Each case runs a small script in a fresh interpreter whose ``torch.cuda.nvtx`` calls are
recorded to a file. Needs PyTorch (the CPU is enough); skipped without it unless
``GMPROF_TEST_REQUIRE_TORCH=1``.
"""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

INSTALLED = os.environ.get("GMPROF_TEST_INSTALLED") == "1"
if not INSTALLED:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

import gmprof  # noqa: E402

try:
    import torch  # noqa: E402,F401
except ImportError:  # pragma: no cover - depends on the environment
    torch = None
    if os.environ.get("GMPROF_TEST_REQUIRE_TORCH") == "1":
        raise

BOOTSTRAP = os.path.join(os.path.dirname(os.path.abspath(gmprof.__file__)), "_bootstrap")

# Records torch.cuda.nvtx calls to $LOG; two optimizers step every iteration (only the first
# that steps marks the ranges); iteration 2's step of `opt` is skipped, as GradScaler does.
SCRIPT = textwrap.dedent(
    """
    import os, torch
    log = open(os.environ["LOG"], "a")
    def note(line):
        log.write(line + "\\n"); log.flush()
    import torch.cuda.nvtx as nvtx
    nvtx.range_push = lambda name: note("push " + name)
    nvtx.range_pop = lambda: note("pop")
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    other = torch.optim.AdamW(model.parameters())
    for i in range(5):
        model(torch.randn(2, 4)).sum().backward()
        if i != 2:
            opt.step()
        other.step()
        opt.zero_grad()
        note("iteration %d" % i)
    """
)


# Records torch's profiler ranges (record_function, which the optimizer's step opens) too.
RECORD_FUNCTIONS = textwrap.dedent(
    """
    import os, torch.autograd.profiler as profiler
    _log = open(os.environ["LOG"], "a")
    _Base = profiler.record_function
    class _Recorded(_Base):
        def __enter__(self):
            _log.write("enter " + self.name + "\\n"); _log.flush()
            return super().__enter__()
        def __exit__(self, *exc):
            _log.write("exit\\n"); _log.flush()
            return super().__exit__(*exc)
    profiler.record_function = _Recorded
    """
)


@unittest.skipIf(torch is None, "needs PyTorch")
class TorchStepsTest(unittest.TestCase):
    def run_script(self, extra_path=(), name="step", env_name=True, record_functions=False):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "log")
            script = os.path.join(tmp, "train.py")
            with open(script, "w") as f:
                f.write(RECORD_FUNCTIONS + SCRIPT if record_functions else SCRIPT)
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join([BOOTSTRAP, *extra_path, *sys.path[1:]])
            env["LOG"] = log
            env.pop("GMPROF_TORCH_STEPS", None)
            if env_name:
                env["GMPROF_TORCH_STEPS"] = name
            done = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=300)
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(log) as f:
                return f.read().splitlines()

    def test_one_range_per_optimizer_step_interval(self):
        lines = self.run_script(name="Train step")
        self.assertEqual(
            lines,
            [
                # Iteration 0 (compilation, warm-up) is outside; each step opens the next range.
                "push Train step", "iteration 0",
                "pop", "push Train step", "iteration 1",
                # Iteration 2 skipped its step: it stays in the range iteration 1's step opened.
                "iteration 2",
                "pop", "push Train step", "iteration 3",
                "pop", "push Train step", "iteration 4",
                # The last range is closed when the interpreter exits.
                "pop",
            ],
        )

    def test_step_ranges_open_outside_torchs_optimizer_step_range(self):
        # torch's profiler (emit_nvtx turns it into NVTX ranges) opens a range around every
        # optimizer step; the step range must not open or close inside it, or torch's pop
        # closes the step range instead of its own.
        lines = self.run_script(record_functions=True)
        self.assertEqual(
            lines[:8],
            [
                "enter Optimizer.step#SGD.step", "exit",
                "push step",
                "enter Optimizer.step#AdamW.step", "exit",
                "enter Optimizer.zero_grad#SGD.zero_grad", "exit",
                "iteration 0",
            ],
        )
        for i, line in enumerate(lines):
            if line.startswith("push") or line == "pop":
                depth = sum(1 for l in lines[:i] if l.startswith("enter")) - lines[:i].count("exit")
                self.assertEqual(depth, 0, "%s inside torch's Optimizer.step range: %s" % (line, lines))

    def test_nothing_happens_without_a_range_name(self):
        self.assertEqual(self.run_script(env_name=False), ["iteration %d" % i for i in range(5)])

    def test_the_environments_own_sitecustomize_still_runs(self):
        with tempfile.TemporaryDirectory() as site:
            with open(os.path.join(site, "sitecustomize.py"), "w") as f:
                f.write("import os\nopen(os.environ['LOG'], 'a').write('user sitecustomize\\n')\n")
            lines = self.run_script(extra_path=[site])
        self.assertEqual(lines[0], "user sitecustomize")
        self.assertEqual(lines.count("push step"), 4)
        self.assertEqual(lines.count("pop"), 4)


if __name__ == "__main__":
    unittest.main()
