"""gmprof.load from Parquet (pyarrow), and the DuckDB and Polars queries over many ranks of
scripts/query_ranks.py, against gmprof merge's straggler table when the command is built."""

import csv
import os
import subprocess
import sys
import tempfile
import unittest

if os.environ.get("GMPROF_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

import gmprof  # noqa: E402

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)
GOLDEN = os.path.join(REPO, "tests", "golden")
sys.path.insert(0, os.path.join(REPO, "scripts"))


def _have(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


HAVE_PYARROW = _have("pyarrow")
REQUIRE = os.environ.get("GMPROF_TEST_REQUIRE_PARQUET") == "1"


def _check_required(test):
    if REQUIRE:
        return test
    return unittest.skipUnless(HAVE_PYARROW, "pyarrow is not installed")(test)


@_check_required
class ParquetLoadTest(unittest.TestCase):
    def test_tables_come_from_parquet_with_the_csv_values(self):
        from_parquet = gmprof.load(GOLDEN, pandas=False, parquet=True)
        from_csv = gmprof.load(GOLDEN, pandas=False, parquet=False)
        self.assertEqual(from_parquet.formats, {"ranges": "parquet", "kernels": "parquet", "stats": "parquet",
                                                "pm": "csv"})
        self.assertEqual(set(from_csv.formats.values()), {"csv"})
        for name in ("ranges", "kernels", "stats"):
            a, b = getattr(from_parquet, name), getattr(from_csv, name)
            self.assertEqual(len(a), len(b), name)
            for i, (x, y) in enumerate(zip(a, b)):
                self.assertEqual(list(x), list(y), "%s row %d: same columns" % (name, i))
                for key in x:
                    # Blanks are None both ways; numbers equal (a CSV "2000" is 2000, the
                    # Parquet float 2000.0).
                    self.assertEqual(x[key], y[key], "%s row %d %s" % (name, i, key))
        root = from_parquet.ranges[0]
        self.assertIsNone(root["wall_time_ns"])
        self.assertIsInstance(from_parquet.kernels[1]["grid_x"], int)

    def test_without_report_json_meta_comes_from_the_parquet_metadata(self):
        import shutil
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("ranges.parquet", "kernels.parquet", "stats.parquet"):
                shutil.copy(os.path.join(GOLDEN, name), tmp)
            r = gmprof.load(tmp, pandas=False)
            self.assertIsNone(r.json)
            self.assertEqual(r.meta["mode"], "kernel_replay")
            self.assertEqual(r.meta["kernel_count"], 16)
            self.assertEqual(len(r.warnings), 4)
            with self.assertRaises(FileNotFoundError) as ctx:
                gmprof.load(tmp, parquet=False)
            self.assertIn("no ranges.csv", str(ctx.exception))

    @unittest.skipUnless(_have("pandas"), "pandas is not installed")
    def test_dataframes_from_parquet(self):
        r = gmprof.load(GOLDEN, parquet=True)
        self.assertEqual(r.ranges.shape, (14, 31))
        self.assertEqual(int(r.ranges.loc[r.ranges.path == "train_step", "gpu_time_ns"].sum()), 18400)
        self.assertEqual(r.top_ranges(1)[0]["total_ns"], 18400)
        self.assertIn("kernel_replay", repr(r))


def _write_ranks(root, factors):
    """Ranks r0, r1, ... with the golden tables, each rank's times scaled by its factor."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    for i, factor in enumerate(factors):
        d = os.path.join(root, "r%d" % i)
        os.makedirs(d)
        for name, column in (("ranges", "gpu_time_ns"), ("kernels", "duration_ns")):
            t = pq.read_table(os.path.join(GOLDEN, name + ".parquet"))
            scaled = pc.cast(pc.multiply(t[column], factor), pa.int64())
            t = t.set_column(t.schema.get_field_index(column), t.schema.field(column), scaled)
            pq.write_table(t, os.path.join(d, name + ".parquet"))


@unittest.skipUnless(REQUIRE or (HAVE_PYARROW and _have("duckdb") and _have("polars")),
                     "pyarrow, duckdb and polars are not all installed")
class QueryRanksTest(unittest.TestCase):
    def test_duckdb_and_polars_find_the_straggler(self):
        import query_ranks
        with tempfile.TemporaryDirectory() as tmp:
            _write_ranks(tmp, [1, 3, 2])
            d = query_ranks.duckdb_queries(tmp, "train_step")
            p = query_ranks.polars_queries(tmp, "train_step")
            self.assertEqual([r[:3] for r in d["steps"]], [(0, 3, "r1"), (1, 3, "r1")])
            self.assertEqual([r[:3] for r in p["steps"]], [(0, 3, "r1"), (1, 3, "r1")])
            self.assertEqual(d["steps"][0][3:], (9200, 18400.0, 27600, 18400))
            self.assertEqual(d["per_rank"], [("r0", 16, 19901), ("r1", 16, 3 * 19901), ("r2", 16, 2 * 19901)])
            self.assertEqual(d["per_rank"], p["per_rank"])
            self.assertEqual(d["top"][0][:3], ("void gemm<128>(float const*, float const*, float*, int)", 12, 6 * 12000))
            command = _gmprof_command()
            if command is None:
                return
            # gmprof merge reads the same files: its straggler table agrees.
            subprocess.run([command, "merge", tmp, "--step", "train_step"], check=True, capture_output=True)
            with open(os.path.join(tmp, "stragglers.csv"), newline="") as f:
                rows = list(csv.DictReader(f))
            self.assertEqual([(int(r["step"]), r["slowest"]) for r in rows], [(s, slowest) for s, _, slowest in
                                                                                [x[:3] for x in d["steps"]]])
            self.assertEqual([int(r["spread_ns"]) for r in rows], [x[6] for x in d["steps"]])


def _gmprof_command():
    try:
        from gmprof.__main__ import find_executable
    except ImportError:
        return None
    return find_executable()


if __name__ == "__main__":
    unittest.main()
