#!/usr/bin/env python3
"""Queries over every rank's Parquet tables of a gmprof run, with DuckDB and with Polars.

    python3 scripts/query_ranks.py OUT [--engine duckdb|polars|both] [--step train_step]

OUT is a run's output directory with one subdirectory per rank (``gmprof run --out OUT`` of
a distributed job): the queries read ``OUT/*/kernels.parquet`` and ``OUT/*/ranges.parquet``
(the rank is the subdirectory's name). Each engine prints three tables: the kernels with the
most GPU time across all ranks, GPU time per rank, and per step (instance of the step range)
the slowest rank (the first by name among equals) and the spread. README ("Parquet outputs") shows the same queries; CI runs
this script (pip install duckdb polars).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, List


def duckdb_queries(root: str, step: str) -> Dict[str, List[tuple]]:
    import duckdb

    kernels = os.path.join(root, "*", "kernels.parquet")
    ranges = os.path.join(root, "*", "ranges.parquet")
    con = duckdb.connect()
    top = con.execute(
        """
        SELECT kernel_name, count(*) AS launches, sum(duration_ns) AS gpu_ns,
               count(DISTINCT filename) AS ranks
        FROM read_parquet(?, filename = true)
        WHERE duration_ns IS NOT NULL
        GROUP BY kernel_name ORDER BY gpu_ns DESC, kernel_name LIMIT 10
        """,
        [kernels],
    ).fetchall()
    per_rank = con.execute(
        """
        SELECT split_part(filename, '/', -2) AS rank, count(*) AS kernels, sum(duration_ns) AS gpu_ns
        FROM read_parquet(?, filename = true)
        GROUP BY rank ORDER BY rank
        """,
        [kernels],
    ).fetchall()
    steps = con.execute(
        """
        WITH s AS (
            SELECT split_part(filename, '/', -2) AS rank, instance AS step, sum(gpu_time_ns) AS gpu_ns
            FROM read_parquet(?, filename = true)
            WHERE path = ? AND gpu_time_ns IS NOT NULL
            GROUP BY rank, step
        )
        SELECT step, count(*) AS ranks, first(rank ORDER BY gpu_ns DESC, rank) AS slowest, min(gpu_ns) AS min_ns,
               median(gpu_ns) AS median_ns, max(gpu_ns) AS max_ns, max(gpu_ns) - min(gpu_ns) AS spread_ns
        FROM s GROUP BY step ORDER BY step
        """,
        [ranges, step],
    ).fetchall()
    return {"top": top, "per_rank": per_rank, "steps": steps}


def polars_queries(root: str, step: str) -> Dict[str, List[tuple]]:
    import polars as pl

    def rank_of(column: str) -> Any:
        return pl.col(column).str.split("/").list.get(-2).alias("rank")

    kernels = pl.scan_parquet(os.path.join(root, "*", "kernels.parquet"), include_file_paths="file")
    top = (
        kernels.filter(pl.col("duration_ns").is_not_null())
        .group_by("kernel_name")
        .agg(pl.len().alias("launches"), pl.col("duration_ns").sum().alias("gpu_ns"),
             pl.col("file").n_unique().alias("ranks"))
        .sort(["gpu_ns", "kernel_name"], descending=[True, False])
        .head(10)
        .collect()
    )
    per_rank = (
        kernels.with_columns(rank_of("file"))
        .group_by("rank")
        .agg(pl.len().alias("kernels"), pl.col("duration_ns").sum().alias("gpu_ns"))
        .sort("rank")
        .collect()
    )
    ranges = pl.scan_parquet(os.path.join(root, "*", "ranges.parquet"), include_file_paths="file")
    steps = (
        ranges.filter((pl.col("path") == step) & pl.col("gpu_time_ns").is_not_null())
        .with_columns(rank_of("file"))
        .group_by(["rank", pl.col("instance").alias("step")])
        .agg(pl.col("gpu_time_ns").sum().alias("gpu_ns"))
        .group_by("step")
        .agg(
            pl.len().alias("ranks"),
            pl.col("rank").sort_by(["gpu_ns", "rank"], descending=[True, False]).first().alias("slowest"),
            pl.col("gpu_ns").min().alias("min_ns"),
            pl.col("gpu_ns").median().alias("median_ns"),
            pl.col("gpu_ns").max().alias("max_ns"),
            (pl.col("gpu_ns").max() - pl.col("gpu_ns").min()).alias("spread_ns"),
        )
        .sort("step")
        .collect()
    )
    return {name: df.rows() for name, df in (("top", top), ("per_rank", per_rank), ("steps", steps))}


def show(engine: str, result: Dict[str, List[tuple]]) -> None:
    titles = {
        "top": "kernels with the most GPU time, all ranks (kernel, launches, GPU ns, ranks)",
        "per_rank": "per rank (rank, kernels, GPU ns)",
        "steps": "per step (step, ranks, slowest, min, median, max, spread ns)",
    }
    for name, rows in result.items():
        print("%s: %s" % (engine, titles[name]))
        for row in rows:
            print("  " + "  ".join(str(v) for v in row))


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--engine", choices=["duckdb", "polars", "both"], default="both")
    p.add_argument("--step", default="train_step", help="the step range's path (default train_step)")
    args = p.parse_args(argv)
    results = {}
    if args.engine in ("duckdb", "both"):
        results["duckdb"] = duckdb_queries(args.out, args.step)
        show("duckdb", results["duckdb"])
    if args.engine in ("polars", "both"):
        results["polars"] = polars_queries(args.out, args.step)
        show("polars", results["polars"])
    if len(results) == 2:
        d, p_ = results["duckdb"], results["polars"]
        same = [r[:3] for r in d["top"]] == [r[:3] for r in p_["top"]] and d["per_rank"] == p_["per_rank"] and \
            [r[:3] for r in d["steps"]] == [r[:3] for r in p_["steps"]]
        print("duckdb and polars agree: %s" % same)
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
