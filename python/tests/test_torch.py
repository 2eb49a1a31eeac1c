"""Tests for gmprof.torch on the CPU: the ranges it pushes and pops, through RecordingBackend.

Needs PyTorch (any build; the CPU is enough). Without it the tests are skipped, unless
``GMPROF_TEST_REQUIRE_TORCH=1`` (``.ci/run`` sets it), which makes a missing torch a failure.
"""

import os
import sys
import threading
import unittest
import warnings
from unittest import mock

INSTALLED = os.environ.get("GMPROF_TEST_INSTALLED") == "1"
if not INSTALLED:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

import gmprof  # noqa: E402

try:
    import torch  # noqa: E402
except ImportError:  # pragma: no cover - depends on the environment
    torch = None
    if os.environ.get("GMPROF_TEST_REQUIRE_TORCH") == "1":
        raise

if torch is not None:
    import gmprof.torch as gt  # noqa: E402

    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.ln = nn.LayerNorm(d)
            self.attn = nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
            self.fail = False

        def forward(self, x):
            x = x + self.attn(self.ln(x))
            if self.fail:
                raise ValueError("boom in forward")
            return x + self.mlp(x)

    class GPT(nn.Module):
        def __init__(self, d=8, layers=2, vocab=16):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.h = nn.ModuleList(Block(d) for _ in range(layers))
            self.head = nn.Linear(d, vocab)

        def forward(self, idx):
            x = self.wte(idx)
            for block in self.h:
                x = block(x)
            return self.head(x)


    class FailsInBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            raise RuntimeError("boom in backward")

    class GPTFailingInBackward(GPT):
        """Its backward raises between the blocks' backward and wte's: mid-pass."""

        def __init__(self):
            super().__init__()
            self.fail = True

        def forward(self, idx):
            x = self.wte(idx)
            if self.fail:
                x = FailsInBackward.apply(x)
            for block in self.h:
                x = block(x)
            return self.head(x)


def balanced(rec):
    """Checks every thread's pops against its pushes, LIFO; returns the per-thread stacks left."""
    stacks = {}
    for thread, kind, path in rec.events:
        stack = stacks.setdefault(thread, [])
        if kind == "push":
            stack.append(path)
        else:
            assert stack and stack[-1] == path, (thread, path, stack)
            stack.pop()
    return {t: s for t, s in stacks.items() if s}


@unittest.skipIf(torch is None, "PyTorch is not installed")
class TorchProfileTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.model = GPT()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.idx = torch.randint(0, 16, (2, 4))
        self.rec = gt.RecordingBackend()

    def train_step(self, backward_thread=False):
        loss = self.model(self.idx).square().mean()
        if backward_thread:
            # What PyTorch does for CUDA tensors: the backward runs on another thread while
            # this one waits.
            worker = threading.Thread(target=loss.backward)
            worker.start()
            worker.join()
        else:
            loss.backward()
        self.opt.step()
        self.opt.zero_grad()

    def events_by_step(self):
        """The main thread's step ranges split the event list into steps."""
        steps, current = [], None
        for event in self.rec.events:
            if event[1] == "push" and event[2] == "step":
                current = []
                steps.append(current)
            if current is not None:
                current.append(event)
        return steps

    # ---- names and nesting -----------------------------------------------------------

    def test_module_tree_names_forward_backward_and_optimizer(self):
        with gt.profile(self.model, depth=2, backend=self.rec) as prof:
            self.train_step()
            prof.step()
        main = threading.get_ident()
        self.assertTrue(all(thread == main for thread, _, _ in self.rec.events))
        ops = [(kind, path) for _, kind, path in self.rec.events]
        forward = ["step/GPT", "step/GPT/wte", "step/GPT/h.0", "step/GPT/h.1", "step/GPT/head"]
        self.assertEqual(
            ops,
            [("push", "step"),
             ("push", forward[0]),
             ("push", forward[1]), ("pop", forward[1]),
             ("push", forward[2]), ("pop", forward[2]),
             ("push", forward[3]), ("pop", forward[3]),
             ("push", forward[4]), ("pop", forward[4]),
             ("pop", forward[0]),
             # The backward, in autograd's order; the root and wte get no input gradient
             # (token ids), so their ranges stay open until their backward work is done.
             ("push", "step/backward"),
             ("push", "step/backward/GPT"),
             ("push", "step/backward/GPT/head"), ("pop", "step/backward/GPT/head"),
             ("push", "step/backward/GPT/h.1"), ("pop", "step/backward/GPT/h.1"),
             ("push", "step/backward/GPT/h.0"), ("pop", "step/backward/GPT/h.0"),
             ("push", "step/backward/GPT/wte"), ("pop", "step/backward/GPT/wte"),
             ("pop", "step/backward/GPT"),
             ("pop", "step/backward"),
             # AdamW.step from the optimizer hooks; torch's own Optimizer.step# region is left
             # out, its zero_grad region is kept.
             ("push", "step/AdamW.step"), ("pop", "step/AdamW.step"),
             ("push", "step/Optimizer.zero_grad#AdamW.zero_grad"),
             ("pop", "step/Optimizer.zero_grad#AdamW.zero_grad"),
             ("pop", "step"),
             # After the last prof.step() the next step runs until the profile ends, as
             # torch.profiler's last ProfilerStep does.
             ("push", "step"), ("pop", "step")],
        )
        self.assertEqual(balanced(self.rec), {})
        self.assertEqual(self.rec.unbalanced, 0)
        self.assertEqual(prof.warnings, [])

    def test_depth_limits_the_levels(self):
        names = lambda depth: [n for _, n, _ in gt.module_names(self.model, depth)]  # noqa: E731
        self.assertEqual(names(0), [])
        self.assertEqual(names(1), ["GPT"])
        self.assertEqual(names(2), ["GPT", "wte", "h.0", "h.1", "head"])
        self.assertEqual(
            names(3),
            ["GPT", "wte", "h.0", "ln", "attn", "mlp", "h.1", "ln", "attn", "mlp", "head"])
        # Sequential runs a forward of its own: its children are a level below it.
        self.assertIn("0", names(None))
        self.assertEqual(gt.module_names(self.model, 3)[3][2], "h.0.ln")
        self.assertEqual([n for _, n, _ in gt.module_names(self.model, 1, name="LM")], ["LM"])
        with self.assertRaises(ValueError):
            gt.module_names(self.model, -1)

        with gt.profile(self.model, depth=1, backend=self.rec, optimizer=False, record_functions=False) as prof:
            self.train_step()
            prof.step()
        self.assertEqual(self.rec.pushed, ["step", "step/GPT", "step/backward", "step/backward/GPT", "step"])

        rec = gt.RecordingBackend()
        with gt.profile(self.model, depth=None, backend=rec):
            self.train_step()
        self.assertIn("step/GPT/h.1/mlp/2", rec.pushed)
        self.assertIn("step/backward/GPT/h.0/mlp/0", rec.pushed)
        self.assertEqual(balanced(rec), {})

    def test_backward_on_another_thread_nests_under_the_step(self):
        with gt.profile(self.model, depth=3, backend=self.rec) as prof:
            for _ in range(2):
                self.train_step(backward_thread=True)
                prof.step()
        main = threading.get_ident()
        backward = [(t, kind, path) for t, kind, path in self.rec.events if path.startswith("step/backward")]
        self.assertTrue(backward)
        self.assertTrue(all(t != main for t, _, _ in backward), "backward ranges are pushed by the autograd thread")
        pushed = [p for _, kind, p in backward if kind == "push"]
        self.assertEqual(pushed.count("step/backward"), 2)
        self.assertEqual(pushed.count("step/backward/GPT/h.1/attn"), 2)
        self.assertEqual(balanced(self.rec), {})
        self.assertEqual(prof.warnings, [])

    # ---- schedule ------------------------------------------------------------------------

    def test_schedule_windows_and_no_hooks_outside_them(self):
        sched = gt.schedule(skip_first=1, wait=1, warmup=1, active=2, repeat=2)
        self.assertEqual([sched(n) for n in range(10)],
                         ["skip", "wait", "warmup", "active", "active", "wait", "warmup", "active", "active", "done"])
        counts, hooked = [], []
        with gt.profile(self.model, depth=2, backend=self.rec, schedule=sched) as prof:
            for _ in range(10):
                before = prof.ranges_pushed
                hooked.append(bool(self.model._forward_pre_hooks) and bool(self.model._backward_pre_hooks))
                self.train_step()
                counts.append(prof.ranges_pushed - before)
                prof.step()
        active = [sched(n) == "active" for n in range(10)]
        self.assertEqual(hooked, active)
        per_step = max(counts)
        self.assertGreater(per_step, 10)
        self.assertEqual(counts, [per_step if a else 0 for a in active])
        # Every active step pushes the same ranges: 4 steps' worth in all.
        self.assertEqual(len(self.events_by_step()), 4)
        self.assertEqual(len({tuple(e[1:] for e in s) for s in self.events_by_step()}), 1)
        self.assertFalse(self.model._forward_hooks or self.model._backward_hooks)

    def test_torch_profiler_schedule_gives_the_same_windows(self):
        for args in (dict(wait=1, warmup=1, active=2, repeat=2), dict(wait=0, warmup=0, active=1, repeat=0),
                     dict(wait=2, warmup=0, active=3, repeat=1, skip_first=3)):
            ours = gt.schedule(**args)
            theirs = torch.profiler.schedule(**args)
            for n in range(30):
                self.assertEqual(ours(n) == "active", gt._is_active(theirs(n)), (args, n))
        sched = torch.profiler.schedule(wait=1, warmup=0, active=1, repeat=1)
        with gt.profile(self.model, depth=1, backend=self.rec, schedule=sched) as prof:
            for _ in range(3):
                self.train_step()
                prof.step()
        self.assertEqual(len(self.events_by_step()), 1)
        with self.assertRaises(ValueError):
            gt.schedule(active=0)
        with self.assertRaises(ValueError):
            gt._is_active("sometimes")

    # ---- record_function ---------------------------------------------------------------

    def test_record_function_regions_both_spellings_and_decorator(self):
        original = (torch.autograd.profiler.record_function.__enter__,
                    torch.autograd.profiler.record_function.__exit__)

        @torch.autograd.profiler.record_function("decorated")
        def loss_of(out):
            return out.square().mean()

        sched = gt.schedule(wait=1, active=1, repeat=1)
        with gt.profile(self.model, depth=1, backend=self.rec, schedule=sched, optimizer=False) as prof:
            for _ in range(3):
                with torch.profiler.record_function("fwd"):
                    out = self.model(self.idx)
                with torch.autograd.profiler.record_function("loss"):
                    loss = loss_of(out)
                loss.backward()
                self.opt.step()
                self.opt.zero_grad()
                prof.step()
        self.assertEqual(
            self.rec.pushed,
            ["step", "step/fwd", "step/fwd/GPT", "step/loss", "step/loss/decorated", "step/backward",
             "step/backward/GPT",
             # optimizer=False: torch's own region stands for the optimizer step.
             "step/Optimizer.step#AdamW.step", "step/Optimizer.zero_grad#AdamW.zero_grad"])
        self.assertEqual(balanced(self.rec), {})
        self.assertEqual((torch.autograd.profiler.record_function.__enter__,
                          torch.autograd.profiler.record_function.__exit__), original, "unpatched at exit")
        with self.assertRaises(ValueError):  # regions work as before outside a profile
            with torch.profiler.record_function("outside"):
                raise ValueError("x")

    def test_record_functions_off(self):
        with gt.profile(self.model, depth=1, backend=self.rec, record_functions=False):
            with torch.profiler.record_function("fwd"):
                self.model(self.idx)
        self.assertEqual(self.rec.pushed, ["step", "step/GPT"])

    # ---- exceptions ------------------------------------------------------------------------

    def test_exception_in_forward_closes_its_ranges(self):
        with gt.profile(self.model, depth=3, backend=self.rec) as prof:
            self.model.h[1].fail = True
            with self.assertRaisesRegex(ValueError, "boom in forward"):
                self.model(self.idx)
            # The failed forward left nothing open: only the step range is.
            self.assertEqual(self.rec.open_paths(), ["step"])
            self.model.h[1].fail = False
            self.train_step()
            prof.step()
        self.assertEqual(balanced(self.rec), {})
        step = self.events_by_step()[0]
        closed_by_fail = [p for _, kind, p in step if kind == "pop"][:9]
        self.assertEqual(closed_by_fail[-3:], ["step/GPT/h.1/attn", "step/GPT/h.1", "step/GPT"])
        # The second forward's ranges are named as the first one's: nothing stale above them.
        self.assertEqual([p for _, k, p in step if k == "push"].count("step/GPT/h.1/attn"), 2)

    def test_exception_out_of_the_profile_closes_everything(self):
        with self.assertRaisesRegex(RuntimeError, "user error"):
            with gt.profile(self.model, depth=2, backend=self.rec):
                with torch.profiler.record_function("region"):
                    self.model(self.idx)
                    raise RuntimeError("user error")
        self.assertEqual(self.rec.open_paths(), [])
        self.assertEqual(balanced(self.rec), {})
        self.assertFalse(self.model._forward_pre_hooks)

    def test_exception_in_backward_leaves_nothing_stale(self):
        self.model = GPTFailingInBackward()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        with gt.profile(self.model, depth=2, backend=self.rec, name="GPT") as prof:
            loss = self.model(self.idx).square().mean()
            with self.assertRaisesRegex(RuntimeError, "boom in backward"):
                loss.backward()
            # The pass failed after its blocks' ranges: they were open, and are closed as
            # the exception leaves backward().
            self.assertIn("step/backward/GPT/h.0", self.rec.pushed)
            self.assertEqual(self.rec.open_paths(), ["step"])
            prof.step()
            self.model.fail = False
            self.train_step()
            prof.step()
        self.assertEqual(balanced(self.rec), {})
        second = [p for _, k, p in self.events_by_step()[1] if k == "push"]
        self.assertEqual(second[0:2], ["step", "step/GPT"])
        self.assertIn("step/backward/GPT/h.0", second)
        self.assertEqual(prof.warnings, [])

    def test_failed_backward_on_a_persistent_autograd_thread(self):
        """As with CUDA: the backward runs on one long-lived thread; a failed pass's ranges
        there are closed by that thread's next backward, before it opens its own."""
        import queue

        jobs, done = queue.Queue(), queue.Queue()

        def worker():
            while True:
                job = jobs.get()
                if job is None:
                    return
                try:
                    job()
                    done.put(None)
                except Exception as err:
                    done.put(err)

        thread = threading.Thread(target=worker)
        thread.start()
        self.addCleanup(lambda: (jobs.put(None), thread.join()))
        self.model = GPTFailingInBackward()
        with gt.profile(self.model, depth=2, backend=self.rec, name="GPT") as prof:
            # With CUDA the engine's device thread runs the pass while the caller waits in
            # torch.autograd.backward; here the worker runs the engine directly (the
            # unwrapped function) and the caller's backward() raising is a separate call.
            engine = torch.autograd.backward.__wrapped__
            loss = self.model(self.idx).square().mean()
            jobs.put(lambda: engine(loss))
            self.assertIsInstance(done.get(), RuntimeError)
            # Left open on the worker: the pass's ranges, which only it can pop.
            self.assertEqual(self.rec.open_paths(), ["step", "step/backward", "step/backward/GPT"])
            with self.assertRaises(RuntimeError):
                torch.autograd.backward(torch.zeros(1))  # what the caller sees: it raised
            # (A range the main thread opened now, with nothing of its own open, would nest
            # under those stale ranges: the same step goes on here.)
            self.model.fail = False
            loss = self.model(self.idx).square().mean()
            jobs.put(lambda: engine(loss))
            self.assertIsNone(done.get())
            self.assertEqual(self.rec.open_paths(), ["step"], "the second pass closed the first's")
        self.assertEqual(balanced(self.rec), {})
        pushed = self.rec.pushed
        self.assertEqual(pushed.count("step/backward"), 2, "both passes under the step, not nested")
        self.assertEqual(pushed.count("step/backward/GPT/h.1"), 2)
        self.assertEqual(prof.warnings, [])

    def test_reentrant_checkpointing_nests_the_inner_passes(self):
        from torch.utils.checkpoint import checkpoint

        model = self.model

        class Checkpointed(GPT):
            def forward(self, idx):
                x = self.wte(idx)
                for block in self.h:
                    x = checkpoint(block, x, use_reentrant=True)
                return self.head(x)

        self.model = Checkpointed()
        self.model.load_state_dict(model.state_dict())
        with gt.profile(self.model, depth=2, backend=self.rec, name="GPT") as prof:
            self.model(self.idx).square().mean().backward()
        self.assertEqual(balanced(self.rec), {})
        self.assertEqual(prof.warnings, [])
        pushed = self.rec.pushed
        self.assertEqual(pushed.count("step/backward"), 1, "one outer pass")
        # Each block's backward is its own pass, run inside the outer one: first the
        # recomputed forward, then that pass's backward.
        for block in ("h.1", "h.0"):
            self.assertIn("step/backward/GPT/" + block, pushed)
            self.assertIn("step/backward/GPT/backward/" + block, pushed)
        self.assertEqual(pushed.count("step/backward/GPT/backward"), 2)

    def test_failing_backend_push_is_counted_and_never_popped(self):
        class Flaky(gt.RecordingBackend):
            def push(self, name):
                if name == "h.0":
                    raise OSError("no range for you")
                super().push(name)

        rec = Flaky()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with gt.profile(self.model, depth=2, backend=rec) as prof:
                self.train_step()
        self.assertEqual(balanced(rec), {})
        self.assertEqual(rec.unbalanced, 0)
        self.assertNotIn("step/GPT/h.0", rec.pushed)
        self.assertIn("step/GPT/h.1", rec.pushed)
        self.assertEqual(len(prof.errors), 2, "forward and backward push of h.0")
        self.assertTrue(any("no range for you" in str(w.message) for w in caught))

    # ---- backends ------------------------------------------------------------------------

    def test_nvtx_backend_passes_ranges_to_torch_cuda_nvtx(self):
        calls = []
        with mock.patch.object(torch.cuda.nvtx, "range_push", side_effect=lambda n: calls.append(("push", n))), \
                mock.patch.object(torch.cuda.nvtx, "range_pop", side_effect=lambda: calls.append(("pop",))):
            with gt.profile(self.model, depth=1, backend=["nvtx", self.rec]):
                self.model(self.idx)
        self.assertEqual(calls, [("push", "step"), ("push", "GPT"), ("pop",), ("pop",)])
        self.assertEqual(self.rec.pushed, ["step", "step/GPT"])

    def test_record_function_backend_shows_the_ranges_to_torch_profiler(self):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as tprof:
            with gt.profile(self.model, depth=2, backend="record_function", optimizer=False,
                            record_functions=False):
                self.model(self.idx).square().mean().backward()
        names = [e.name for e in tprof.events()]
        for name in ("step", "GPT", "h.1", "backward", "wte"):
            self.assertIn(name, names)
        self.assertEqual(names.count("h.0"), 2, "forward and backward")
        self.assertEqual(names.count("backward"), 1)

    def test_gmprof_backend_initializes_and_finishes_gmprof(self):
        from test_gmprof import EnvMixin, FakeLibrary

        env = EnvMixin()
        env.setUp()
        self.addCleanup(env.tearDown)
        lib = FakeLibrary()
        gmprof._set_library(lib)
        with gt.profile(self.model, depth=1, mode="per_range", output_dir="some-out") as prof:
            self.model(self.idx)
        self.assertEqual(lib.calls, [("init",), ("push", b"step"), ("push", b"GPT"), ("pop",), ("pop",), ("finish",)])
        self.assertEqual(lib.range_scope, "process")
        self.assertEqual(lib.options["mode"], b"per_range")
        self.assertEqual(prof.output_dir, os.path.abspath("some-out"))
        self.assertFalse(gmprof.is_initialized())

        # An initialized gmprof is used as it is and left running.
        lib2 = FakeLibrary()
        gmprof._set_library(lib2)
        gmprof.init()
        with gt.profile(None) as prof:
            pass
        self.assertEqual(lib2.calls, [("init",), ("push", b"step"), ("pop",)])
        self.assertTrue(gmprof.is_initialized())
        with self.assertRaisesRegex(RuntimeError, "no output directory"):
            prof.report()

    def test_gmprof_init_failure_is_a_clear_error(self):
        from test_gmprof import EnvMixin, FakeLibrary

        env = EnvMixin()
        env.setUp()
        self.addCleanup(env.tearDown)
        lib = FakeLibrary()
        lib.statuses["init"] = [gmprof.GMPROF_ERROR_LIBRARY_NOT_FOUND]
        lib.messages[gmprof.GMPROF_ERROR_LIBRARY_NOT_FOUND] = "libcuda.so.1 not found"
        gmprof._set_library(lib)
        with self.assertRaisesRegex(gmprof.GmprofError, "libcuda.so.1 not found"):
            with gt.profile(self.model):
                self.fail("the block must not run")
        self.assertFalse(self.model._forward_pre_hooks)
        # Nothing is left patched or registered: a new profile starts.
        with gt.profile(self.model, depth=1, backend=self.rec):
            pass

    def test_lazy_attribute_and_argument_checks(self):
        self.assertIs(gmprof.torch, gt)
        with self.assertRaises(TypeError):
            gt.profile(object())
        with self.assertRaises(ValueError):
            gt.profile(self.model, backend="perfetto")
        with gt.profile(None, backend=self.rec) as prof:
            with self.assertRaisesRegex(RuntimeError, "another gmprof.torch.profile"):
                gt.profile(None, backend=gt.RecordingBackend()).__enter__()
            prof.step()
        with self.assertRaisesRegex(RuntimeError, "outside the profile"):
            prof.step()
        self.assertEqual(self.rec.pushed, ["step", "step"])


if __name__ == "__main__":
    unittest.main()
