"""Tests for ``gmprof.capture``: the context manager, the decorator and the C calls they make.

The fake library records the calls as the C ABI sees them; ``RealLibraryCaptureTest`` runs
against the built libgmprof.so (``GMPROF_TEST_LIBRARY``, set by tests/python_module.rs), where
no GPU is needed to see a stop without a start refused and a bad mode rejected.
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
if os.environ.get("GMPROF_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(HERE, os.pardir))
sys.path.insert(0, HERE)  # test_gmprof, however this file was found

import gmprof  # noqa: E402
from test_gmprof import EnvMixin, FakeLibrary  # noqa: E402


class CaptureLibrary(FakeLibrary):
    """A fake libgmprof with the capture calls: a running flag, the options, the directory."""

    def __init__(self):
        super().__init__()
        self.running = False
        self.dir = b""

    def gmprof_capture_start(self, options):
        o = options.contents
        self.options = {"mode": o.mode, "metrics": o.metrics, "output_dir": o.output_dir}
        self.pm = (os.environ.get("GMPROF_PM_SAMPLING"), os.environ.get("GMPROF_PM_INTERVAL"))
        self.calls.append(("capture_start",))
        if self.running:
            self.last_error = b"capture 1 is running; one capture at a time"
            return gmprof.GMPROF_ERROR_NOT_INITIALIZED
        status = self._ret("capture_start")
        if status == 0:
            self.running = True
            self.dir = o.output_dir + b"/capture-1/node7-pid1"
        return status

    def gmprof_capture_stop(self):
        self.calls.append(("capture_stop",))
        if not self.running:
            self.last_error = b"no capture is running: call gmprof_capture_start first"
            return gmprof.GMPROF_ERROR_NOT_INITIALIZED
        self.running = False
        return self._ret("capture_stop")

    def gmprof_output_dir(self):
        return self.dir


class CaptureTest(EnvMixin, unittest.TestCase):
    def setUp(self):
        super().setUp()
        self.lib = CaptureLibrary()
        gmprof._set_library(self.lib, "<fake>")

    def tearDown(self):
        gmprof._set_library(None)
        super().tearDown()

    def test_a_block_is_captured_and_names_its_directory(self):
        with gmprof.capture(mode="per_kernel", metrics=["dram__bytes_read.sum", "gpu__time_duration.sum"],
                            output_dir="/runs/a") as c:
            self.assertIsNone(c.output_dir)
            self.assertTrue(self.lib.running)
        self.assertEqual(self.lib.calls, [("capture_start",), ("capture_stop",)])
        self.assertEqual(self.lib.options["mode"], b"per_kernel")
        self.assertEqual(self.lib.options["metrics"], b"dram__bytes_read.sum,gpu__time_duration.sum")
        self.assertEqual(self.lib.options["output_dir"], b"/runs/a")
        self.assertEqual(c.output_dir, "/runs/a/capture-1/node7-pid1")

    def test_pm_settings_travel_in_the_environment_for_the_call_only(self):
        os.environ.pop("GMPROF_PM_SAMPLING", None)
        gmprof.capture_start(pm_sampling=["dram__bytes_read.sum.per_second"], pm_interval="50us")
        self.assertEqual(self.lib.pm, ("dram__bytes_read.sum.per_second", "50us"))
        self.assertNotIn("GMPROF_PM_SAMPLING", os.environ)
        gmprof.capture_stop()
        with self.assertRaises(ValueError):
            gmprof.capture_start(pm_interval="50us")

    def test_overlap_and_a_stop_without_a_start_raise_with_the_library_message(self):
        gmprof.capture_start()
        with self.assertRaises(gmprof.GmprofError) as ctx:
            gmprof.capture_start()
        self.assertIn("one capture at a time", str(ctx.exception))
        gmprof.capture_stop()
        with self.assertRaises(gmprof.GmprofError) as ctx:
            gmprof.capture_stop()
        self.assertEqual(ctx.exception.status_name, "GMPROF_ERROR_NOT_INITIALIZED")

    def test_the_users_exception_is_not_masked(self):
        with self.assertRaises(KeyError):
            with gmprof.capture():
                raise KeyError("boom")
        self.assertFalse(self.lib.running, "the capture was stopped on the way out")

    def test_a_decorated_function_is_captured_at_each_call(self):
        @gmprof.capture(mode="trace")
        def step(x):
            self.assertTrue(self.lib.running)
            return x + 1

        self.assertEqual(step(1), 2)
        self.assertEqual(step(2), 3)
        self.assertEqual([c[0] for c in self.lib.calls], ["capture_start", "capture_stop"] * 2)

    def test_disabled_does_nothing(self):
        os.environ["GMPROF_DISABLE"] = "1"
        with gmprof.capture() as c:
            pass
        self.assertEqual(self.lib.calls, [])
        self.assertIsNone(c.output_dir)


@unittest.skipUnless(os.environ.get("GMPROF_TEST_LIBRARY"), "GMPROF_TEST_LIBRARY names no built libgmprof.so")
class RealLibraryCaptureTest(EnvMixin, unittest.TestCase):
    def setUp(self):
        super().setUp()
        os.environ["GMPROF_LIBRARY"] = os.environ["GMPROF_TEST_LIBRARY"]
        gmprof._set_library(None)

    def test_a_stop_without_a_start_and_a_bad_mode_are_refused(self):
        with self.assertRaises(gmprof.GmprofError) as ctx:
            gmprof.capture_stop()
        self.assertEqual(ctx.exception.status_name, "GMPROF_ERROR_NOT_INITIALIZED", str(ctx.exception))
        self.assertIn("gmprof_capture_start first", ctx.exception.message)
        with self.assertRaises(gmprof.GmprofError) as ctx:
            gmprof.capture_start(mode="fastest")
        self.assertEqual(ctx.exception.status_name, "GMPROF_ERROR_INVALID_ARGUMENT", str(ctx.exception))
        self.assertIn("unknown mode 'fastest'", ctx.exception.message)


if __name__ == "__main__":
    unittest.main()
