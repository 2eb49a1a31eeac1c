"""Streamed outputs read back (issue 42): gmprof.load over the part files of
tests/data/streamed (two ranks of a run streamed through the capture path; rank1's kernels
twice as long), the aggregates against a recomputation from the parts, a corrupt part, a run
killed before its report, gmprof.diff, and README's DuckDB and Polars queries run verbatim."""

import json
import math
import os
import re
import shutil
import sys
import tempfile
import unittest

if os.environ.get("GMPROF_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

import gmprof  # noqa: E402

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)
FIXTURE = os.path.join(REPO, "tests", "data", "streamed")
RANK0 = os.path.join(FIXTURE, "rank0")
# DDSketch's relative error (analysis::online::RELATIVE_ERROR).
RELATIVE_ERROR = 0.01


def _have(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


REQUIRE = os.environ.get("GMPROF_TEST_REQUIRE_PARQUET") == "1"
HAVE_PYARROW = REQUIRE or _have("pyarrow")


def _fold(path):
    """analysis::online::fold_numbers: a digit run not right after a letter or digit is #."""
    return re.sub(r"(?<![A-Za-z0-9])[0-9]+", "#", path)


def _rank_value(values, q):
    """The value of rank floor(q (n - 1)), the one the sketch estimates."""
    ordered = sorted(values)
    return ordered[int(math.floor(q * (len(ordered) - 1)))]


def _copy():
    tmp = tempfile.mkdtemp(prefix="gmprof-streamed-")
    out = os.path.join(tmp, "out")
    shutil.copytree(FIXTURE, out)
    return tmp, out


@unittest.skipUnless(HAVE_PYARROW, "pyarrow is not installed")
class StreamedLoadTest(unittest.TestCase):
    def test_tables_come_from_the_parts(self):
        r = gmprof.load(RANK0, pandas=False)
        s = r.streamed
        self.assertEqual((s["kernels"], s["ranges"], s["steps"]), (144, 72, 24))
        self.assertEqual(len(r.kernels), s["kernels"])
        self.assertEqual(len(r.ranges), s["ranges"])
        self.assertEqual(r.transfers, [])
        self.assertEqual(r.formats["kernels"], "parquet parts")
        self.assertIsNone(r.stats)
        self.assertEqual(r.skipped, [])
        # One step row per step, in order; their kernels add up to the run's.
        self.assertEqual([row["step"] for row in r.steps], list(range(24)))
        self.assertEqual(sum(row["kernels"] for row in r.steps), 144)
        self.assertEqual(r.meta["kernel_count"], 144)
        top = r.top_ranges(1)[0]
        self.assertEqual((top["range_path"], top["count"]), ("step", 24))
        self.assertAlmostEqual(top["share_pct"], 100.0)

    def test_whole_run_aggregates_equal_a_recomputation_from_the_parts(self):
        for rank in ("rank0", "rank1"):
            r = gmprof.load(os.path.join(FIXTURE, rank), pandas=False)
            values = {}
            for k in r.kernels:
                values.setdefault(("kernel", "duration_ns", k["kernel_name"]), []).append(k["duration_ns"])
            for g in r.ranges:
                values.setdefault(("range", "gpu_time_ns", _fold(g["path"])), []).append(g["gpu_time_ns"])
                values.setdefault(("range", "wall_time_ns", _fold(g["path"])), []).append(g["wall_time_ns"])
            whole = [a for a in r.aggregates if a["window"] is None]
            self.assertEqual(len(whole), len(values), rank)
            for a in whole:
                vs = values[(a["table"], a["quantity"], a["key"])]
                measured = [v for v in vs if v is not None]
                label = "%s %s %s" % (rank, a["key"], a["quantity"])
                self.assertEqual(a["count"], len(measured), label)
                self.assertEqual(a["missing"], len(vs) - len(measured), label)
                if not measured:
                    self.assertIsNone(a["total_ns"], label)  # not measured: blank, never 0
                    continue
                self.assertEqual(a["total_ns"], sum(measured), label)
                self.assertEqual((a["min_ns"], a["max_ns"]), (min(measured), max(measured)), label)
                for q, column in ((0.5, "p50_ns"), (0.9, "p90_ns"), (0.99, "p99_ns")):
                    want = _rank_value(measured, q)
                    self.assertLessEqual(abs(a[column] - want), RELATIVE_ERROR * want + 1, "%s %s" % (label, column))
            # report.json's whole-run aggregates are the same rows.
            from_json = {(a["table"], a["quantity"], a["key"]): a["count"] for a in r.streamed["aggregates"]}
            self.assertEqual(from_json, {(a["table"], a["quantity"], a["key"]): a["count"] for a in whole})

    @unittest.skipUnless(REQUIRE or _have("pandas"), "pandas is not installed")
    def test_dataframes(self):
        r = gmprof.load(RANK0, pandas=True)
        self.assertEqual(r.kernels.shape[0], 144)
        self.assertEqual(int(r.steps["kernels"].sum()), 144)
        self.assertEqual(int(r.kernels.groupby("kernel_name")["duration_ns"].count()["gemm"]), 48)
        self.assertTrue(r.aggregates["window"].isna().any(), "the whole run's rows: window null")

    def test_a_corrupt_part_is_named_and_the_others_are_read(self):
        tmp, out = _copy()
        try:
            part = os.path.join(out, "rank0", "kernels", "part-00000.parquet")
            with open(part, "rb") as f:
                data = f.read()
            with open(part, "wb") as f:
                f.write(data[: len(data) // 2])
            # A killed run's open segment: hidden, never read.
            with open(os.path.join(out, "rank0", "kernels", ".part-00002.parquet.tmp-42"), "wb") as f:
                f.write(b"PAR1")
            r = gmprof.load(os.path.join(out, "rank0"), pandas=False)
            self.assertEqual(len(r.skipped), 1)
            self.assertTrue(r.skipped[0].startswith("kernels/part-00000.parquet: "), r.skipped)
            self.assertEqual(len(r.kernels), 144 - 100)  # part 1's rows
            self.assertEqual(len(r.ranges), 72)
        finally:
            shutil.rmtree(tmp)

    def test_a_run_killed_before_its_report_loads_from_its_parts(self):
        tmp, out = _copy()
        try:
            os.remove(os.path.join(out, "rank1", "report.json"))
            r = gmprof.load(os.path.join(out, "rank1"), pandas=False)
            self.assertIsNone(r.json)
            self.assertEqual(r.meta["mode"], "trace")
            self.assertEqual(len(r.kernels), 144)
            self.assertEqual(r.streamed, {})
        finally:
            shutil.rmtree(tmp)

    def test_a_checkpoint_beside_the_parts_gives_the_meta_and_the_parts_the_rows(self):
        tmp, out = _copy()
        try:
            rank = os.path.join(out, "rank1")
            with open(os.path.join(rank, "report.json"), encoding="utf-8") as f:
                checkpoint = json.load(f)
            checkpoint["streamed"] = None
            with open(os.path.join(rank, "report.json"), "w", encoding="utf-8") as f:
                json.dump(checkpoint, f)
            with open(os.path.join(rank, "kernels.csv"), "w", encoding="utf-8") as f:
                f.write("kernel_name,duration_ns\ngemm,1\n")  # the checkpoint's start of the run
            r = gmprof.load(rank, pandas=False)
            self.assertEqual(len(r.kernels), 144)
            self.assertIn("checkpoint", r.warnings[-1])
        finally:
            shutil.rmtree(tmp)

    def test_a_further_context_is_a_report_of_its_own(self):
        tmp, out = _copy()
        try:
            context = os.path.join(out, "rank0", "context-1")
            shutil.copytree(os.path.join(out, "rank1"), context)
            os.remove(os.path.join(context, "report.json"))
            r = gmprof.load(os.path.join(out, "rank0"), pandas=False)
            self.assertEqual(len(r.kernels), 144)
            self.assertEqual([c.path for c in r.contexts], [context])
            c = r.contexts[0]
            self.assertEqual((len(c.kernels), len(c.steps), c.meta["mode"]), (144, 24, "trace"))
            self.assertEqual(sum(k["duration_ns"] for k in c.kernels), 2 * sum(k["duration_ns"] for k in r.kernels))
        finally:
            shutil.rmtree(tmp)

    def test_without_parquet_the_error_says_what_to_do(self):
        with self.assertRaises(ImportError) as ctx:
            gmprof.load(RANK0, parquet=False)
        self.assertIn("streamed run", str(ctx.exception))
        self.assertIn("pyarrow", str(ctx.exception))


class StreamedDiffTest(unittest.TestCase):
    def test_diff_marks_the_slower_rank(self):
        from gmprof.__main__ import find_executable

        if find_executable() is None:
            self.skipTest("the gmprof command is not built")
        rows = gmprof.diff(RANK0, os.path.join(FIXTURE, "rank1"), pandas=False)
        self.assertEqual(len(rows), 5)
        for row in rows:
            self.assertEqual(row["verdict"], "slower", row)
            self.assertAlmostEqual(row["change_pct"], 100.0)
            self.assertIsNone(row["p_value"])  # no rank test from aggregates: blank, never 0


def _readme_blocks():
    """The SQL and Python blocks after README's streamed-queries marker."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        text = f.read()
    start = text.index("<!-- streamed-queries:")
    sql = re.search(r"```sql\n(.*?)```", text[start:], re.S).group(1)
    python = re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)
    return sql, python


@unittest.skipUnless(REQUIRE or (HAVE_PYARROW and _have("duckdb") and _have("polars")),
                     "pyarrow, duckdb and polars are not all installed")
class ReadmeQueriesTest(unittest.TestCase):
    def test_readme_queries_run_verbatim_over_the_parts(self):
        import duckdb

        sql, python = _readme_blocks()
        statements = [s.strip() for s in re.sub(r"--[^\n]*", "", sql).split(";") if s.strip()]
        self.assertEqual(len(statements), 3)
        tmp, _ = _copy()
        cwd = os.getcwd()
        try:
            os.chdir(tmp)
            con = duckdb.connect()
            top, steps, groups = (con.execute(s).fetchall() for s in statements)
            scope = {}
            exec(compile(python, "README.md", "exec"), scope)  # noqa: S102 - the README's own block
        finally:
            os.chdir(cwd)
            shutil.rmtree(tmp)
        r0 = gmprof.load(RANK0, pandas=False)
        # Kernels: launches and GPU time of both ranks; rank1's are twice rank0's.
        per_name = {}
        for k in r0.kernels:
            n, t = per_name.get(k["kernel_name"], (0, 0))
            per_name[k["kernel_name"]] = (n + 1, t + k["duration_ns"])
        self.assertEqual({name: (n, t) for name, n, t in top}, {k: (2 * n, 3 * t) for k, (n, t) in per_name.items()})
        self.assertEqual(top[0][0], "layernorm")
        # Steps: one row per step and process.
        self.assertEqual(len(steps), 48)
        self.assertEqual([(s[0], s[1]) for s in steps[:2]], [("rank0", 0), ("rank1", 0)])
        self.assertEqual(steps[1][3], 2 * steps[0][3])
        # Aggregates: the range groups, instances of both ranks.
        self.assertEqual([(g[0], g[1]) for g in groups], [("step", 48), ("step/layer #", 96)])
        # Polars: the same steps and kernels.
        pl_steps, pl_kernels = scope["steps"], scope["kernels"]
        self.assertEqual(pl_steps.height, 48)
        self.assertEqual(sorted(pl_kernels.rows()), sorted(top))


if __name__ == "__main__":
    unittest.main()
