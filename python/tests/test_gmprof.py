"""Tests for the gmprof Python module.

Most tests inject a fake library through the internal hook ``gmprof._set_library`` and need
neither a GPU nor libgmprof.so. ``RealLibraryTest`` runs against a built libgmprof.so when
``GMPROF_TEST_LIBRARY`` points at one (tests/python_module.rs sets it).

Run from the repository root: ``python3 -m unittest discover -s python/tests -v``.
With ``GMPROF_TEST_INSTALLED=1`` the tests import the installed ``gmprof`` (the wheel, in a
venv; ``.ci/run`` does this) instead of ``python/gmprof``.
"""

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

INSTALLED = os.environ.get("GMPROF_TEST_INSTALLED") == "1"
if not INSTALLED:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

import gmprof  # noqa: E402


class FakeLibrary:
    """Records calls the way the C ABI would see them and returns scripted statuses."""

    def __init__(self):
        self.calls = []
        self.statuses = {}  # function name -> list of statuses to return, in order
        self.messages = {}  # status -> message for gmprof_last_error
        self.last_error = b""
        self.options = None

    def _ret(self, fn):
        queue = self.statuses.get(fn)
        status = queue.pop(0) if queue else 0
        self.last_error = self.messages.get(status, "").encode() if status else b""
        return status

    def gmprof_init(self, options):
        o = options.contents
        self.options = {
            "mode": o.mode,
            "metrics": o.metrics,
            "output_dir": o.output_dir,
            "device": o.device,
            "synchronize_on_pop": o.synchronize_on_pop,
        }
        # The range scope travels in the environment during the call.
        self.range_scope = os.environ.get("GMPROF_RANGE_SCOPE")
        self.pm = (os.environ.get("GMPROF_PM_SAMPLING"), os.environ.get("GMPROF_PM_INTERVAL"))
        self.format = os.environ.get("GMPROF_FORMAT")
        self.trace_format = os.environ.get("GMPROF_TRACE_FORMAT")
        self.pc = os.environ.get("GMPROF_PC_SAMPLING")
        self.rotate = (os.environ.get("GMPROF_ROTATE"), os.environ.get("GMPROF_ROTATE_STEP"))
        self.calls.append(("init",))
        return self._ret("init")

    def gmprof_push_range(self, name):
        assert isinstance(name, bytes), name
        self.calls.append(("push", name))
        return self._ret("push")

    def gmprof_pop_range(self):
        self.calls.append(("pop",))
        return self._ret("pop")

    def gmprof_finish(self):
        self.calls.append(("finish",))
        return self._ret("finish")

    def gmprof_last_error(self):
        return self.last_error

    def gmprof_version(self):
        return b"0.1.0"


class EnvMixin:
    """Saves and restores the environment variables a test changes."""

    VARS = ("GMPROF_DISABLE", "GMPROF_LIBRARY", "GMPROF_OUT", "GMPROF_CUPTI_LIB", "GMPROF_RANGE_SCOPE",
            "GMPROF_PM_SAMPLING", "GMPROF_PM_INTERVAL", "GMPROF_CUDA_LIB_DIRS")

    def setUp(self):
        self._saved = {k: os.environ.get(k) for k in self.VARS}
        for k in ("GMPROF_DISABLE", "GMPROF_OUT", "GMPROF_RANGE_SCOPE", "GMPROF_PM_SAMPLING", "GMPROF_PM_INTERVAL"):
            os.environ.pop(k, None)

    def tearDown(self):
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        gmprof._set_library(None)


class FakeLibraryTest(EnvMixin, unittest.TestCase):
    def setUp(self):
        super().setUp()
        self.lib = FakeLibrary()
        gmprof._set_library(self.lib)

    def test_context_manager_pushes_and_pops_in_order(self):
        with gmprof.range("step"):
            with gmprof.range("forward"):
                pass
            with gmprof.range("backward"):
                pass
        self.assertEqual(
            self.lib.calls,
            [("push", b"step"), ("push", b"forward"), ("pop",), ("push", b"backward"), ("pop",), ("pop",)],
        )

    def test_decorator_with_name(self):
        @gmprof.range("forward")
        def forward(x):
            """doc"""
            self.lib.calls.append(("body", x))
            return x * 2

        self.assertEqual(forward(21), 42)
        self.assertEqual(forward.__name__, "forward")
        self.assertEqual(forward.__doc__, "doc")
        self.assertEqual(self.lib.calls, [("push", b"forward"), ("body", 21), ("pop",)])

    def test_decorator_without_arguments_uses_qualname(self):
        class Model:
            @gmprof.range
            def backward(self):
                return "done"

        self.assertEqual(Model().backward(), "done")
        qualname = Model.backward.__qualname__.encode()
        self.assertTrue(qualname.endswith(b"Model.backward"), qualname)
        self.assertEqual(self.lib.calls, [("push", qualname), ("pop",)])

    def test_decorator_with_empty_call_uses_qualname(self):
        @gmprof.range()
        def step():
            pass

        step()
        self.assertEqual(self.lib.calls, [("push", step.__qualname__.encode()), ("pop",)])

    def test_context_manager_without_name_is_an_error(self):
        with self.assertRaises(TypeError):
            with gmprof.range():
                pass
        self.assertEqual(self.lib.calls, [])

    def test_exception_pops_and_propagates(self):
        with self.assertRaises(KeyError):
            with gmprof.range("step"):
                raise KeyError("boom")
        self.assertEqual(self.lib.calls, [("push", b"step"), ("pop",)])

        @gmprof.range("f")
        def f():
            raise ZeroDivisionError

        with self.assertRaises(ZeroDivisionError):
            f()
        self.assertEqual(self.lib.calls[2:], [("push", b"f"), ("pop",)])

    def test_pop_failure_during_exception_does_not_mask(self):
        self.lib.statuses["pop"] = [gmprof.GMPROF_ERROR_UNBALANCED]
        self.lib.messages[gmprof.GMPROF_ERROR_UNBALANCED] = "no open range on this thread"
        with self.assertRaises(KeyError) as ctx:
            with gmprof.range("step"):
                raise KeyError("user error")
        self.assertEqual(ctx.exception.args, ("user error",))
        notes = getattr(ctx.exception, "__notes__", None)
        if sys.version_info >= (3, 11):
            self.assertTrue(notes and "GMPROF_ERROR_UNBALANCED" in notes[0], notes)

    def test_pop_failure_without_exception_raises(self):
        self.lib.statuses["pop"] = [gmprof.GMPROF_ERROR_UNBALANCED]
        with self.assertRaises(gmprof.GmprofError) as ctx:
            with gmprof.range("step"):
                pass
        self.assertEqual(ctx.exception.status_name, "GMPROF_ERROR_UNBALANCED")

    def test_push_failure_skips_body_and_pop(self):
        self.lib.statuses["push"] = [gmprof.GMPROF_ERROR_NOT_INITIALIZED]
        ran = []
        with self.assertRaises(gmprof.GmprofError):
            with gmprof.range("step"):
                ran.append(1)
        self.assertEqual(ran, [])
        self.assertEqual(self.lib.calls, [("push", b"step")])

    def test_error_carries_status_name_and_message(self):
        self.lib.statuses["pop"] = [gmprof.GMPROF_ERROR_UNBALANCED]
        self.lib.messages[gmprof.GMPROF_ERROR_UNBALANCED] = "pop_range with no open range on this thread"
        with self.assertRaises(gmprof.GmprofError) as ctx:
            gmprof.pop_range()
        err = ctx.exception
        self.assertIsInstance(err, RuntimeError)
        self.assertEqual(err.status, 4)
        self.assertEqual(err.status_name, "GMPROF_ERROR_UNBALANCED")
        self.assertEqual(err.message, "pop_range with no open range on this thread")
        self.assertIn("GMPROF_ERROR_UNBALANCED", str(err))
        self.assertIn("pop_range with no open range on this thread", str(err))
        self.assertEqual(gmprof.GmprofError(99).status_name, "GMPROF_STATUS_99")

    def test_nul_in_name_raises_value_error_before_c(self):
        with self.assertRaises(ValueError):
            gmprof.push_range("a\0b")
        with self.assertRaises(ValueError):
            gmprof.range("a\0b")
        with self.assertRaises(ValueError):
            gmprof.init(mode="trace\0")
        with self.assertRaises(TypeError):
            gmprof.push_range(42)
        self.assertEqual(self.lib.calls, [])

    def test_names_are_utf8(self):
        gmprof.push_range("étape-步")
        self.assertEqual(self.lib.calls, [("push", "étape-步".encode("utf-8"))])

    def test_disabled_makes_no_calls(self):
        os.environ["GMPROF_DISABLE"] = "1"
        # Even a missing library must not matter.
        gmprof._set_library(None)
        os.environ["GMPROF_LIBRARY"] = "/nonexistent/libgmprof.so"
        self.assertFalse(gmprof.is_enabled())
        gmprof.init(mode="trace")
        gmprof.push_range("a")
        gmprof.pop_range()
        with gmprof.range("b"):
            pass

        @gmprof.range
        def f():
            return 1

        self.assertEqual(f(), 1)
        self.assertIsNone(gmprof.finish())
        self.assertFalse(gmprof.is_initialized())
        self.assertEqual(self.lib.calls, [])

    def test_init_options_and_metrics_list_joined(self):
        gmprof.init(mode="per_range", metrics=["a.sum", "b.avg"], output_dir="out/dir", device=1,
                    synchronize_on_pop=True)
        self.assertTrue(gmprof.is_initialized())
        opts = self.lib.options
        self.assertEqual(opts["mode"], b"per_range")
        self.assertEqual(opts["metrics"], b"a.sum,b.avg")
        self.assertEqual(opts["output_dir"], os.path.abspath("out/dir").encode())
        self.assertEqual(opts["device"], 1)
        self.assertEqual(opts["synchronize_on_pop"], 1)
        self.assertEqual(gmprof.finish(), os.path.abspath("out/dir"))
        self.assertFalse(gmprof.is_initialized())
        self.assertEqual(self.lib.calls, [("init",), ("finish",)])

    def test_init_defaults(self):
        gmprof.init(metrics="x,y")
        opts = self.lib.options
        self.assertIsNone(opts["mode"])
        self.assertEqual(opts["metrics"], b"x,y")
        self.assertEqual(opts["device"], -1)
        self.assertEqual(opts["synchronize_on_pop"], 0)
        self.assertEqual(gmprof.finish(), os.path.abspath("gmprof-out"))

    def test_output_dir_from_env(self):
        os.environ["GMPROF_OUT"] = "env-out"
        gmprof.init()
        self.assertEqual(self.lib.options["output_dir"], os.path.abspath("env-out").encode())
        self.assertEqual(gmprof.finish(), os.path.abspath("env-out"))

    def test_finish_returns_the_directory_the_library_claimed(self):
        # Under a rank variable the library writes into a per-process subdirectory.
        self.lib.gmprof_output_dir = lambda: os.path.abspath("out/node7-1").encode()
        gmprof.init(output_dir="out")
        self.assertEqual(self.lib.options["output_dir"], os.path.abspath("out").encode())
        self.assertEqual(gmprof.finish(), os.path.abspath("out/node7-1"))

    def test_failed_init_leaves_uninitialized(self):
        self.lib.statuses["init"] = [gmprof.GMPROF_ERROR_UNKNOWN_METRIC]
        self.lib.messages[gmprof.GMPROF_ERROR_UNKNOWN_METRIC] = "unknown metric 'nope'"
        with self.assertRaises(gmprof.GmprofError) as ctx:
            gmprof.init(metrics=["nope"])
        self.assertEqual(ctx.exception.status_name, "GMPROF_ERROR_UNKNOWN_METRIC")
        self.assertIn("unknown metric 'nope'", str(ctx.exception))
        self.assertFalse(gmprof.is_initialized())

    def test_version(self):
        self.assertEqual(gmprof.version(), "0.1.0")

    def test_one_range_object_across_threads(self):
        r = gmprof.range("worker")
        barrier = threading.Barrier(4)

        def work():
            with r:
                barrier.wait()

        threads = [threading.Thread(target=work) for _ in (0, 1, 2, 3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(sorted(self.lib.calls), sorted([("push", b"worker")] * 4 + [("pop",)] * 4))


class MissingLibraryTest(EnvMixin, unittest.TestCase):
    def test_missing_library_lists_tried_paths(self):
        gmprof._set_library(None)
        os.environ["GMPROF_LIBRARY"] = "/nonexistent/dir/libgmprof.so"
        with self.assertRaises(gmprof.GmprofError) as ctx:
            gmprof.push_range("x")
        err = ctx.exception
        self.assertEqual(err.status_name, "GMPROF_ERROR_LIBRARY_NOT_FOUND")
        self.assertIn("/nonexistent/dir/libgmprof.so", str(err))
        self.assertIn("GMPROF_LIBRARY", str(err))

    def test_default_candidates(self):
        os.environ.pop("GMPROF_LIBRARY", None)
        paths = gmprof._candidates()
        pkg = os.path.dirname(os.path.abspath(gmprof.__file__))
        self.assertEqual(paths[0], os.path.join(pkg, "libgmprof.so"))
        if INSTALLED:
            # No Cargo.toml above site-packages: the package's own copy, then the loader's.
            self.assertEqual(len(paths), 2, paths)
        else:
            root = os.path.dirname(os.path.dirname(pkg))
            self.assertIn(os.path.join(root, "target", "release", "libgmprof.so"), paths)
            self.assertGreaterEqual(len(paths), 3)


class RangeScopeTest(EnvMixin, unittest.TestCase):
    def setUp(self):
        super().setUp()
        self.lib = FakeLibrary()
        gmprof._set_library(self.lib)

    def test_default_is_process_and_the_environment_is_restored(self):
        gmprof.init()
        self.assertEqual(self.lib.range_scope, "process")
        self.assertNotIn("GMPROF_RANGE_SCOPE", os.environ)
        gmprof.finish()

    def test_thread_scope_is_passed(self):
        os.environ["GMPROF_RANGE_SCOPE"] = "process"
        gmprof.init(range_scope="thread")
        self.assertEqual(self.lib.range_scope, "thread")
        self.assertEqual(os.environ["GMPROF_RANGE_SCOPE"], "process")  # the caller's, back
        gmprof.finish()

    def test_environment_is_the_fallback(self):
        os.environ["GMPROF_RANGE_SCOPE"] = "thread"
        gmprof.init()
        self.assertEqual(self.lib.range_scope, "thread")
        gmprof.finish()

    def test_pm_sampling_travels_in_the_environment_for_the_call(self):
        gmprof.init(mode="trace", pm_sampling=["dram__bytes_read.sum.per_second", "default"], pm_interval=10000)
        self.assertEqual(self.lib.pm, ("dram__bytes_read.sum.per_second,default", "10000"))
        self.assertNotIn("GMPROF_PM_SAMPLING", os.environ)
        self.assertNotIn("GMPROF_PM_INTERVAL", os.environ)
        gmprof.finish()

    def test_pc_sampling_travels_in_the_environment_for_the_call(self):
        os.environ.pop("GMPROF_PC_SAMPLING", None)
        gmprof.init(mode="trace", pc_sampling=True)
        self.assertEqual(self.lib.pc, "default")
        self.assertNotIn("GMPROF_PC_SAMPLING", os.environ)
        gmprof.finish()
        gmprof.init(mode="trace", pc_sampling=12)
        self.assertEqual(self.lib.pc, "12")
        gmprof.finish()

    def test_a_pc_sampling_interval_out_of_range_is_rejected_before_c(self):
        for bad, error in ((40, ValueError), (1.5, TypeError)):
            with self.assertRaises(error):
                gmprof.init(pc_sampling=bad)
        self.assertEqual(self.lib.calls, [])

    def test_formats_travel_in_the_environment_for_the_call(self):
        gmprof.init(format=["Parquet"])
        self.assertEqual(self.lib.format, "parquet")
        self.assertNotIn("GMPROF_FORMAT", os.environ)
        gmprof.finish()

    def test_the_trace_format_travels_in_the_environment_for_the_call(self):
        gmprof.init(trace_format=" Kineto")
        self.assertEqual(self.lib.trace_format, "kineto")
        self.assertNotIn("GMPROF_TRACE_FORMAT", os.environ)
        gmprof.finish()
        with self.assertRaises(ValueError) as ctx:
            gmprof.init(trace_format="perfetto")
        self.assertIn("'chrome' or 'kineto'", str(ctx.exception))

    def test_rotation_travels_in_the_environment_for_the_call(self):
        gmprof.init(mode="per_kernel", rotate=16, rotate_step="Train step *")
        self.assertEqual(self.lib.rotate, ("16", "Train step *"))
        self.assertNotIn("GMPROF_ROTATE", os.environ)
        gmprof.finish()
        gmprof.init(rotate=" auto")
        self.assertEqual(self.lib.rotate, ("auto", None))
        gmprof.finish()
        for bad in (0, True, "every", 2.5):
            with self.assertRaises(ValueError) as ctx:
                gmprof.init(rotate=bad)
            self.assertIn("'auto' or a whole number of steps", str(ctx.exception))

    def test_unknown_format_is_rejected_before_c(self):
        with self.assertRaises(ValueError) as ctx:
            gmprof.init(format="csv,xml")
        self.assertIn("csv,parquet", str(ctx.exception))
        self.assertEqual(self.lib.calls, [])

    def test_pm_interval_without_sampling_is_rejected_before_c(self):
        with self.assertRaises(ValueError):
            gmprof.init(pm_interval="20us")
        self.assertEqual(self.lib.calls, [])

    def test_invalid_scope_is_rejected_before_c(self):
        with self.assertRaises(ValueError):
            gmprof.init(range_scope="global")
        self.assertEqual(self.lib.calls, [])
        self.assertFalse(gmprof.is_initialized())

    def test_scope_restored_when_init_fails(self):
        self.lib.statuses["init"] = [gmprof.GMPROF_ERROR_CUPTI]
        with self.assertRaises(gmprof.GmprofError):
            gmprof.init(range_scope="thread")
        self.assertEqual(self.lib.range_scope, "thread")
        self.assertNotIn("GMPROF_RANGE_SCOPE", os.environ)


def fake_site_packages(root, cupti_source=None):
    """A site-packages tree with NVIDIA's pip layout; copies cupti_source's lib dir into cu13."""
    site = os.path.join(root, "site-packages")
    cu13 = os.path.join(site, "nvidia", "cu13", "lib")
    cu12 = os.path.join(site, "nvidia", "cuda_cupti", "lib")
    os.makedirs(cu13)
    os.makedirs(cu12)
    os.makedirs(os.path.join(site, "nvidia", "cublas"))  # not a lib dir gmprof searches
    if cupti_source:
        src = os.path.dirname(cupti_source)
        for name in os.listdir(src):
            if name.startswith(("libcupti", "libnvperf")):
                shutil.copy(os.path.join(src, name), cu13)
    return site, cu13, cu12


class CudaLibDirsTest(EnvMixin, unittest.TestCase):
    def test_finds_the_pip_wheel_lib_dirs(self):
        with tempfile.TemporaryDirectory() as tmp:
            site, cu13, cu12 = fake_site_packages(tmp)
            self.assertEqual(gmprof.cuda_lib_dirs([site, os.path.join(tmp, "nope"), site]), [cu13, cu12])
            self.assertEqual(gmprof.cuda_lib_dirs([tmp]), [])

    def test_exported_after_the_users_dirs(self):
        with tempfile.TemporaryDirectory() as tmp:
            site, cu13, cu12 = fake_site_packages(tmp)
            os.environ["GMPROF_CUDA_LIB_DIRS"] = "/mine"
            sys.path.insert(0, site)
            try:
                gmprof._export_cuda_lib_dirs()
            finally:
                sys.path.remove(site)
            found = os.environ["GMPROF_CUDA_LIB_DIRS"].split(os.pathsep)
            self.assertEqual(found[:3], ["/mine", cu13, cu12])
            # Then the wheels' dirs of this environment itself (a venv with PyTorch has some).
            self.assertEqual(found[3:], [d for d in gmprof.cuda_lib_dirs() if d not in found[:3]])

    @unittest.skipUnless(os.environ.get("GMPROF_TEST_LIBRARY") and os.environ.get("GMPROF_TEST_CUPTI_LIB"),
                         "needs GMPROF_TEST_LIBRARY and GMPROF_TEST_CUPTI_LIB (libcupti from the pip wheel)")
    def test_real_library_loads_cupti_from_a_pip_site_packages(self):
        # A fresh process: the library keeps the first libcupti it loads.
        with tempfile.TemporaryDirectory() as tmp:
            site, cu13, _ = fake_site_packages(tmp, os.environ["GMPROF_TEST_CUPTI_LIB"])
            env = {k: v for k, v in os.environ.items()
                   if k not in ("GMPROF_CUPTI_LIB", "CUDA_HOME", "CUDA_PATH", "GMPROF_CUDA_LIB_DIRS")}
            env["GMPROF_LIBRARY"] = os.environ["GMPROF_TEST_LIBRARY"]
            env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH")) if p)
            if not INSTALLED:
                env["PYTHONPATH"] += os.pathsep + os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)
            code = ("import gmprof, os\n"
                    "try:\n    gmprof.init(mode='trace', output_dir=%r); print('initialized')\n"
                    "except gmprof.GmprofError as e:\n    print(e)\n"
                    "print('DIRS=' + os.environ.get('GMPROF_CUDA_LIB_DIRS', ''))\n" % os.path.join(tmp, "out"))
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                 timeout=120)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("DIRS=" + cu13, out.stdout)
            # libcupti came from the fake site-packages: what fails now (no GPU here) is libcuda.
            self.assertNotIn("libcupti could not be loaded", out.stdout)
            if "initialized" not in out.stdout:
                self.assertIn("libcuda could not be loaded", out.stdout)


@unittest.skipUnless(INSTALLED, "GMPROF_TEST_INSTALLED=1 tests the installed wheel")
class InstalledWheelTest(EnvMixin, unittest.TestCase):
    def test_package_finds_its_own_library(self):
        os.environ.pop("GMPROF_LIBRARY", None)
        gmprof._set_library(None)
        pkg = os.path.dirname(os.path.abspath(gmprof.__file__))
        self.assertIn("site-packages", pkg)
        self.assertEqual(gmprof.library_path(), os.path.join(pkg, "libgmprof.so"))
        from importlib.metadata import version
        self.assertEqual(gmprof.version(), version("gmprof"))

    def test_python_dash_m_runs_the_cli(self):
        out = subprocess.run([sys.executable, "-m", "gmprof", "--version"], capture_output=True, text=True,
                             timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        from importlib.metadata import version
        self.assertEqual(out.stdout.strip(), "gmprof " + version("gmprof"))


@unittest.skipUnless(os.environ.get("GMPROF_TEST_LIBRARY"),
                     "GMPROF_TEST_LIBRARY is not set to a built libgmprof.so")
class RealLibraryTest(EnvMixin, unittest.TestCase):
    def setUp(self):
        super().setUp()
        os.environ["GMPROF_LIBRARY"] = os.environ["GMPROF_TEST_LIBRARY"]
        gmprof._set_library(None)

    def test_version(self):
        self.assertTrue(gmprof.version())
        self.assertEqual(gmprof.library_path(), os.environ["GMPROF_TEST_LIBRARY"])

    def test_init_without_cupti_reports_library_not_found(self):
        os.environ["GMPROF_CUPTI_LIB"] = "/nonexistent/libcupti.so"
        with self.assertRaises(gmprof.GmprofError) as ctx:
            gmprof.init()
        err = ctx.exception
        self.assertEqual(err.status_name, "GMPROF_ERROR_LIBRARY_NOT_FOUND", str(err))
        self.assertIn("libcupti could not be loaded", err.message)
        self.assertFalse(gmprof.is_initialized())

    def test_range_calls_without_init(self):
        with self.assertRaises(gmprof.GmprofError) as ctx:
            gmprof.push_range("x")
        self.assertEqual(ctx.exception.status_name, "GMPROF_ERROR_NOT_INITIALIZED", str(ctx.exception))
        with self.assertRaises(gmprof.GmprofError) as ctx:
            gmprof.pop_range()
        self.assertEqual(ctx.exception.status_name, "GMPROF_ERROR_NOT_INITIALIZED", str(ctx.exception))
        with self.assertRaises(gmprof.GmprofError) as ctx:
            gmprof.finish()
        self.assertEqual(ctx.exception.status_name, "GMPROF_ERROR_NOT_INITIALIZED", str(ctx.exception))

    def test_nul_checked_before_c(self):
        with self.assertRaises(ValueError):
            gmprof.push_range("a\0b")


if __name__ == "__main__":
    unittest.main()
