"""Reading a streamed run's part files (issue 42): what :func:`gmprof.load` does with an
output directory whose rows were streamed past ``GMPROF_ROW_LIMIT``.

Such a directory has no ``ranges.csv``/``kernels.parquet``; each table is a directory of
Parquet part files (``kernels/part-00000.parquet``, ...), and ``report.json`` has a
``streamed`` section. Each table here is the concatenation of its parts, in part order:
``ranges``, ``kernels``, ``transfers``, ``steps`` (one row per step), ``step_ranges`` and
``aggregates`` (per window of steps, and for the whole run with ``window`` null). A part that
cannot be read (cut short by a copy) is named in :attr:`gmprof.Report.skipped` and left out;
the others are read. The open segment of a killed run is a hidden ``.part-*.tmp-PID`` file,
never read. Part files are Parquet only: pyarrow is required.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["STREAMED_TABLES", "context_dirs", "is_streamed", "read_streamed"]

#: The streamed tables, each a directory of part files.
STREAMED_TABLES = ("ranges", "kernels", "transfers", "steps", "step_ranges", "aggregates")


def part_files(table_dir: str) -> List[str]:
    """The part files of a table directory, in part order (hidden temporary files left out)."""
    if not os.path.isdir(table_dir):
        return []
    names = sorted(n for n in os.listdir(table_dir) if n.startswith("part-") and n.endswith(".parquet"))
    return [os.path.join(table_dir, n) for n in names]


def context_dirs(path: str) -> List[str]:
    """The directories of a process's further CUDA contexts (``context-1/``, ...), where a
    streamed run's second and later contexts write their parts, in number order."""
    found = []
    if os.path.isdir(path):
        for name in os.listdir(path):
            number = name[len("context-"):] if name.startswith("context-") else ""
            if number.isdigit() and os.path.isdir(os.path.join(path, name)):
                found.append((int(number), os.path.join(path, name)))
    return [p for _, p in sorted(found)]


def is_streamed(path: str, report_json: Optional[Dict[str, Any]]) -> bool:
    """Whether ``path`` holds a streamed run: report.json says so, or it has part files (a
    run killed after the row limit: without report.json, or beside the whole-file tables of
    a checkpoint taken before the limit, which hold only the run's start; the parts hold
    every row streamed, the first ones included)."""
    if report_json is not None and report_json.get("streamed"):
        return True
    return any(part_files(os.path.join(path, table)) for table in ("kernels", "ranges"))


def _read_table(pq: Any, path: str, table: str, skipped: List[str]) -> Tuple[Any, Optional[str]]:
    """(pyarrow Table of every readable part or ``None`` without parts, the first part's
    ``gmprof.meta``)."""
    import pyarrow as pa  # type: ignore[import-not-found]

    tables = []
    meta: Optional[str] = None
    for file in part_files(os.path.join(path, table)):
        try:
            parquet = pq.ParquetFile(file)
            t = parquet.read()
        except Exception as e:  # noqa: BLE001 - any unreadable part is named and skipped
            skipped.append("%s/%s: %s" % (table, os.path.basename(file), e))
            continue
        if meta is None:
            kv = parquet.metadata.metadata or {}
            raw = kv.get(b"gmprof.meta")
            meta = raw.decode("utf-8") if raw is not None else None
        tables.append(t.replace_schema_metadata(None))
    if not tables:
        return None, meta
    return pa.concat_tables(tables), meta


def read_streamed(path: str, pq: Any, pd: Any) -> Tuple[Dict[str, Tuple[List[str], Any]], List[str], Optional[str]]:
    """The streamed tables of ``path``: ``{name: (header, rows or DataFrame)}``, the parts
    skipped (``TABLE/part-NNNNN.parquet: why``) and the first part's ``gmprof.meta``."""
    if pq is None:
        raise ImportError(
            "%s is a streamed run: its rows are in Parquet part files (kernels/, ranges/, ...), which "
            "gmprof.load reads with pyarrow: pip install pyarrow (parquet=False cannot read it)" % path)
    tables: Dict[str, Tuple[List[str], Any]] = {}
    skipped: List[str] = []
    meta: Optional[str] = None
    for name in STREAMED_TABLES:
        table, table_meta = _read_table(pq, path, name, skipped)
        meta = meta or table_meta
        if table is None:
            tables[name] = ([], pd.DataFrame() if pd is not None else [])
            continue
        rows: Any = table.to_pandas() if pd is not None else table.to_pylist()
        tables[name] = (list(table.column_names), rows)
    return tables, skipped, meta
