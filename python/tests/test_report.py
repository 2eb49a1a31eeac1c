"""gmprof.load on the recorded outputs in tests/golden (no GPU, no libgmprof.so)."""

import os
import shutil
import sys
import tempfile
import unittest

if os.environ.get("GMPROF_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

import gmprof  # noqa: E402

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "tests", "golden")

try:
    import pandas  # noqa: F401
    HAVE_PANDAS = True
except ImportError:
    HAVE_PANDAS = False


class LoadListsTest(unittest.TestCase):
    def setUp(self):
        self.r = gmprof.load(GOLDEN, pandas=False)

    def test_row_counts_match_the_files(self):
        self.assertEqual(len(self.r.ranges), 14)
        self.assertEqual(len(self.r.kernels), 16)
        self.assertEqual(self.r.meta["kernel_count"], 16)
        self.assertEqual(len(self.r.stats), 25)

    def test_pm_sampling_rows(self):
        # tests/golden/pm.csv is the golden file of tests/pm_fold.rs (its own small session).
        pm = self.r.pm
        self.assertEqual(len(pm), 21)  # 4 ranges and 3 kernels, 3 metrics each
        step = pm[0]
        self.assertEqual((step["scope"], step["path"], step["metric"]), ("range", "step", "dram__bytes_read.sum.per_second"))
        self.assertAlmostEqual(step["total"], 2.36e9)
        self.assertIs(step["few_samples"], False)
        self.assertIsNone(pm[1]["total"])  # a percentage has no integral: None, never 0

    def test_values_are_typed_and_blanks_are_none(self):
        root = self.r.ranges[0]
        self.assertEqual(root["path"], "<root>")
        self.assertIsNone(root["wall_time_ns"])  # not measured: None, never 0
        self.assertIsNone(root["range_slot"])
        self.assertEqual(root["gpu_time_ns"], 600)
        step = self.r.ranges[1]
        self.assertEqual((step["path"], step["gpu_time_ns"], step["thread"]), ("train_step", 9200, 100))
        self.assertAlmostEqual(step["sm__throughput.avg.pct_of_peak_sustained_elapsed"], 63.96739130434783)
        gemm = self.r.kernels[1]
        self.assertEqual(gemm["kernel_name"], "void gemm<128>(float const*, float const*, float*, int)")
        self.assertEqual((gemm["grid_x"], gemm["range_path"], gemm["duration_ns"]), (80, "train_step/forward", 2000))

    def test_meta_and_warnings_from_report_json(self):
        self.assertEqual(self.r.meta["mode"], "kernel_replay")
        self.assertEqual(self.r.meta["device_name"], "NVIDIA H100 80GB HBM3")
        self.assertEqual(len(self.r.warnings), 4)
        self.assertIn("eval, \"final\"", self.r.warnings[0])
        self.assertEqual(self.r.json["meta"]["total_gpu_time_ns"], 19901)

    def test_top_ranges_by_gpu_time(self):
        top = self.r.top_ranges(3)
        self.assertEqual([t["range_path"] for t in top], ["train_step", "train_step/backward", "train_step/forward"])
        self.assertEqual(top[0]["total_ns"], 18400)
        self.assertAlmostEqual(top[0]["share_pct"], 92.45766544394753)
        self.assertEqual(len(self.r.top_ranges()), 8)  # every range path, fewer than 10

    def test_html_summary(self):
        page = self.r._repr_html_()
        self.assertIn("<table>", page)
        self.assertIn("<td>train_step</td><td>2</td><td>0</td><td>18400</td>", page)
        self.assertIn("&lt;root&gt;", page)  # escaped
        self.assertIn("eval, &quot;final&quot;", page)
        self.assertNotIn('eval, "final"', page)
        self.assertEqual(page.count("<tr>"), 1 + 8)
        self.assertIn("kernels: 16", page)
        self.assertIn("kernel_replay", repr(self.r))

    def test_without_report_json_meta_comes_from_the_csv_header(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("ranges.csv", "kernels.csv", "stats.csv"):
                shutil.copy(os.path.join(GOLDEN, name), tmp)
            r = gmprof.load(tmp, pandas=False)
            self.assertIsNone(r.json)
            self.assertEqual(r.meta["mode"], "kernel_replay")
            self.assertEqual(r.meta["kernel_count"], 16)
            self.assertEqual(r.meta["device_name"], "NVIDIA H100 80GB HBM3")
            self.assertEqual(len(r.warnings), 4)
            self.assertEqual(len(r.ranges), 14)

    def test_missing_file_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(os.path.join(GOLDEN, "ranges.csv"), tmp)
            with self.assertRaises(FileNotFoundError) as ctx:
                gmprof.load(tmp)
            self.assertIn("kernels.csv", str(ctx.exception))
            self.assertIn("gmprof merge", str(ctx.exception))


@unittest.skipUnless(HAVE_PANDAS, "pandas is not installed")
class LoadPandasTest(unittest.TestCase):
    def test_dataframes(self):
        import pandas as pd
        r = gmprof.load(GOLDEN)
        self.assertIsInstance(r.ranges, pd.DataFrame)
        self.assertEqual(r.ranges.shape, (14, 31))
        self.assertIn("untimed_transfer_count", r.ranges.columns)
        self.assertEqual(r.kernels.shape[0], 16)
        self.assertEqual(int(r.ranges.loc[r.ranges.path == "train_step", "gpu_time_ns"].sum()), 18400)
        self.assertTrue(pd.isna(r.ranges.loc[0, "wall_time_ns"]))
        by_kernel = r.kernels.groupby("range_path")["duration_ns"].count()
        self.assertEqual(int(by_kernel["train_step/forward"]), int((r.kernels.range_path == "train_step/forward").sum()))
        self.assertEqual(r.stats.loc[r.stats.table == "range"].shape[0], 15)


@unittest.skipIf(HAVE_PANDAS, "pandas is installed")
class LoadWithoutPandasTest(unittest.TestCase):
    def test_lists_by_default_and_a_clear_error_when_required(self):
        self.assertIsInstance(gmprof.load(GOLDEN).ranges, list)
        with self.assertRaises(ImportError) as ctx:
            gmprof.load(GOLDEN, pandas=True)
        self.assertIn("pip install pandas", str(ctx.exception))


def _gmprof_command():
    from gmprof.__main__ import find_executable
    return find_executable()


class DiffTest(unittest.TestCase):
    """gmprof.diff: the gmprof command's diff rows, typed, blanks as None."""

    def setUp(self):
        if _gmprof_command() is None:
            if os.environ.get("GMPROF_TEST_INSTALLED") == "1":
                self.fail("the installed package has no gmprof command")
            self.skipTest("no gmprof command built (cargo build)")

    def _doubled_backward(self, tmp):
        import json
        with open(os.path.join(GOLDEN, "report.json"), encoding="utf-8") as f:
            report = json.load(f)
        for row in report["ranges"]:
            if row["path"] == "train_step/backward":
                row["gpu_time_ns"] *= 2
        new = os.path.join(tmp, "new")
        os.makedirs(new)
        with open(os.path.join(new, "report.json"), "w", encoding="utf-8") as f:
            json.dump(report, f)
        return new

    def test_rows_with_lists(self):
        with tempfile.TemporaryDirectory() as tmp:
            rows = gmprof.diff(GOLDEN, self._doubled_backward(tmp), pandas=False)
        backward = [r for r in rows if r["name"] == "train_step/backward" and r["quantity"] == "gpu_time_ns"]
        self.assertEqual(len(backward), 1)
        b = backward[0]
        self.assertEqual((b["kind"], b["base_n"], b["new_n"]), ("range", 2, 2))
        self.assertEqual((b["base_median"], b["new_median"], b["change_pct"]), (5500.0, 11000.0, 100.0))
        # Two instances a side cannot be judged: no p-value (None, not 0) and too_few.
        self.assertIsNone(b["p_value"])
        self.assertEqual(b["verdict"], "too_few")
        same = [r for r in rows if r["name"] == "train_step/forward" and r["quantity"] == "gpu_time_ns"][0]
        self.assertEqual(same["change_pct"], 0.0)

    def test_a_missing_run_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaises(RuntimeError) as ctx:
                gmprof.diff(GOLDEN, os.path.join(tmp, "nothing"), pandas=False)
        self.assertIn("no such directory or report.json", str(ctx.exception))

    @unittest.skipUnless(HAVE_PANDAS, "pandas is not installed")
    def test_dataframe(self):
        import pandas as pd
        with tempfile.TemporaryDirectory() as tmp:
            df = gmprof.diff(GOLDEN, self._doubled_backward(tmp), skip_first=1)
        self.assertIsInstance(df, pd.DataFrame)
        row = df[(df.name == "train_step/backward") & (df.quantity == "gpu_time_ns")].iloc[0]
        self.assertEqual((row.base_n, row.change_pct), (1, 100.0))  # step 0 left out as warm-up
        self.assertTrue(pd.isna(row.p_value))
        self.assertTrue(any(c.startswith("method: two-sided Mann-Whitney U") for c in df.attrs["comments"]))


if __name__ == "__main__":
    unittest.main()
