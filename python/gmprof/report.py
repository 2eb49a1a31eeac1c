"""Reading gmprof's outputs back into Python: :func:`load` and :class:`Report`.

Pure Python (``csv``, ``json``): importable and usable without a GPU and without
``libgmprof.so``. With pandas installed, the tables are :class:`pandas.DataFrame`; without it
they are lists of dicts (one per row, keyed by the CSV header).

With pyarrow installed, each table is read from its Parquet file (``kernels.parquet``, typed
columns, far faster than CSV at millions of rows) when the run wrote one, else from its CSV
file; ``parquet=False`` always reads CSV, ``parquet=True`` requires pyarrow.

A streamed run (past ``GMPROF_ROW_LIMIT``, issue 42) has no whole-file row tables: its
tables are read from their Parquet part files (``kernels/part-*.parquet``, ...) and it has
``steps``, ``step_ranges`` and ``aggregates`` besides (see :mod:`gmprof.streamed`).

A value gmprof did not measure is blank in the CSV files and null in the Parquet files; here
it is ``None`` (``NaN`` in a numeric DataFrame column), never 0.
"""

from __future__ import annotations

import csv
import html
import json
import os
from typing import Any, Dict, List, Optional, Tuple

from .streamed import context_dirs, is_streamed, read_streamed

__all__ = ["Report", "load"]

Row = Dict[str, Any]


def _number(text: str) -> Any:
    """``text`` as an int, else a float; raises ValueError if it is neither."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def _read_csv(path: str) -> Tuple[List[str], List[Row], List[str]]:
    """(header, rows, comment lines) of a gmprof CSV file.

    gmprof writes ``# ...`` comment lines before the header. A column whose non-blank
    values are all numbers becomes numeric; blanks become ``None``.
    """
    comments: List[str] = []
    with open(path, newline="", encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    start = 0
    while start < len(lines) and lines[start].startswith("#"):
        comments.append(lines[start].rstrip("\r\n"))
        start += 1
    reader = csv.reader(lines[start:])
    header = next(reader, [])
    raw = [row for row in reader if row]
    columns: List[List[Any]] = [[row[i] if i < len(row) else "" for row in raw] for i in range(len(header))]
    for values in columns:
        try:
            converted = [None if v == "" else _number(v) for v in values]
        except ValueError:
            converted = [None if v == "" else v for v in values]
        values[:] = converted
    rows = [{name: columns[i][r] for i, name in enumerate(header)} for r in range(len(raw))]
    return header, rows, comments


def _pyarrow(wanted: Optional[bool]) -> Any:
    """``pyarrow.parquet`` when Parquet is to be read (``None``: when installed)."""
    if wanted is False:
        return None
    try:
        import pyarrow.parquet as pq  # type: ignore[import-not-found]
    except ImportError:
        if wanted:
            raise ImportError("gmprof.load(..., parquet=True) needs pyarrow: pip install pyarrow") from None
        return None
    return pq


def _read_parquet(pq: Any, path: str, pandas: Any) -> Tuple[List[str], Any, Dict[str, str]]:
    """(header, rows or DataFrame, gmprof key-value metadata) of a gmprof Parquet file."""
    file = pq.ParquetFile(path)
    table = file.read()
    kv = {k.decode("utf-8"): v.decode("utf-8") for k, v in (file.metadata.metadata or {}).items()
          if k.startswith(b"gmprof.")}
    header = list(table.column_names)
    rows: Any = table.to_pandas() if pandas is not None else table.to_pylist()
    return header, rows, kv


def _pandas(wanted: Optional[bool]) -> Any:
    if wanted is False:
        return None
    try:
        import pandas  # type: ignore[import-not-found]
    except ImportError:
        if wanted:
            raise ImportError("gmprof.load(..., pandas=True) needs pandas: pip install pandas") from None
        return None
    return pandas


class Report:
    """The outputs of one gmprof run, as loaded by :func:`load`.

    Attributes:
        path: the output directory (absolute).
        ranges: ranges.csv, one row per range instance.
        kernels: kernels.csv, one row per kernel launch.
        stats: stats.csv (``table`` is ``range`` or ``kernel``; count, missing, total, mean,
            percentiles and share per range path or kernel name).
        meta: report.json's ``meta`` (mode, device, metrics, counts, warnings, ...), or the
            ``# key: value`` header lines of ranges.csv when report.json is absent.
        warnings: the run's warnings (dropped records, ranges left open, ...).
        json: the whole report.json, or ``None`` when absent.
        pm: pm.csv (PM sampling folded into ranges and kernels: one row per range or kernel
            and metric, with mean, peak, total, samples, coverage, few_samples,
            edge_share, windows and confidence), or ``None`` when the run did not sample.
        streamed: report.json's ``streamed`` section (why, row limit, counts, the whole
            run's aggregates, the first steps) for a streamed run, else ``None``. A streamed
            run's ``ranges``, ``kernels`` and ``transfers`` come from their part files, it has
            ``steps`` (one row per step), ``step_ranges`` and ``aggregates`` (per window of
            steps and, with ``window`` null, for the whole run), and ``stats`` is ``None``
            (the aggregates stand for it).
        skipped: part files that could not be read and were left out, each
            ``TABLE/part-NNNNN.parquet: why`` (empty when every part was read).
        contexts: a streamed process's further CUDA contexts (``context-N/``), each a
            :class:`Report` of its parts (its ``meta`` from their metadata), in number order;
            empty otherwise.
    """

    def __init__(self, path: str, tables: Dict[str, Tuple[List[str], Any]], meta: Dict[str, Any],
                 warnings: List[str], report_json: Optional[Dict[str, Any]], pandas: Any,
                 formats: Optional[Dict[str, str]] = None) -> None:
        self.path = path
        self.meta = meta
        self.warnings = warnings
        self.json = report_json
        #: The file format each table was read from: ``{"kernels": "parquet", ...}``.
        self.formats = formats or {name: "csv" for name in tables}
        self._data: Dict[str, Any] = {}
        for name, (header, rows) in tables.items():
            if pandas is not None and isinstance(rows, pandas.DataFrame):
                value: Any = rows
            else:
                value = rows if pandas is None else pandas.DataFrame(rows, columns=header)
            self._data[name] = rows
            setattr(self, name, value)

    def _records(self, name: str) -> List[Row]:
        """Table ``name`` as dicts, ``None`` where not measured (a DataFrame's NaN included)."""
        rows = self._data[name]
        if isinstance(rows, list):
            return rows
        return rows.astype(object).where(rows.notna(), None).to_dict("records")

    ranges: Any
    kernels: Any
    stats: Any
    pm: Any = None
    transfers: Any = None
    steps: Any = None
    step_ranges: Any = None
    aggregates: Any = None
    streamed: Optional[Dict[str, Any]] = None
    skipped: List[str] = []
    contexts: List["Report"] = []

    def top_ranges(self, n: int = 10, quantity: str = "gpu_time_ns") -> List[Row]:
        """The ``n`` range paths with the largest total ``quantity`` (from stats.csv), largest
        first. ``quantity`` is ``gpu_time_ns`` or ``wall_time_ns``. Rows are dicts with
        ``range_path``, ``count``, ``missing``, ``total_ns``, ``mean_ns``, ``p50_ns``,
        ``max_ns`` and ``share_pct`` (``None`` where not measured)."""
        if self.streamed is not None:
            return self._top_streamed(n, quantity)
        rows = [r for r in self._records("stats") if r.get("table") == "range" and r.get("quantity") == quantity]
        rows.sort(key=lambda r: (r.get("total_ns") is None, -(r.get("total_ns") or 0)))
        return rows[:n]

    def _top_streamed(self, n: int, quantity: str) -> List[Row]:
        """top_ranges of a streamed run: the whole run's aggregates (``window`` null), keyed by
        range group; share of the run's GPU time for ``gpu_time_ns``."""
        total = self.meta.get("total_gpu_time_ns") if quantity == "gpu_time_ns" else None
        rows = []
        for r in self._records("aggregates"):
            if r.get("window") is not None or r.get("table") != "range" or r.get("quantity") != quantity:
                continue
            row = {k: r.get(k) for k in ("count", "missing", "total_ns", "mean_ns", "p50_ns", "max_ns")}
            row["range_path"] = r.get("key")
            row["share_pct"] = 100.0 * row["total_ns"] / total if total and row["total_ns"] is not None else None
            rows.append(row)
        rows.sort(key=lambda r: (r.get("total_ns") is None, -(r.get("total_ns") or 0)))
        return rows[:n]

    def __repr__(self) -> str:
        return "<gmprof.Report %s: mode %s, %d ranges, %d kernels, %d warnings>" % (
            self.path,
            self.meta.get("mode", "?"),
            len(self._data["ranges"]),
            len(self._data["kernels"]),
            len(self.warnings),
        )

    def _repr_html_(self) -> str:
        """A notebook summary: the run's facts and a table of the top ranges by GPU time."""
        esc = html.escape

        def cell(value: Any, digits: int = 0) -> str:
            if value is None:
                return "\u2014"  # not measured
            if isinstance(value, float):
                return esc("%.*f" % (digits, value))
            return esc(str(value))

        facts = [
            ("mode", self.meta.get("mode")),
            ("device", self.meta.get("device_name")),
            ("kernels", self.meta.get("kernel_count")),
            ("GPU time (ns)", self.meta.get("total_gpu_time_ns")),
            ("warnings", len(self.warnings)),
        ]
        out = ['<div class="gmprof-report">', "<p><b>gmprof</b> %s<br>" % esc(self.path)]
        out.append(" &middot; ".join("%s: %s" % (esc(k), cell(v)) for k, v in facts) + "</p>")
        out.append("<table><thead><tr><th>range</th><th>count</th><th>missing</th><th>total GPU ns</th>"
                   "<th>mean ns</th><th>p50 ns</th><th>max ns</th><th>share %</th></tr></thead><tbody>")
        for r in self.top_ranges(10):
            out.append("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                       "<td>%s</td></tr>" % (
                           cell(r.get("range_path")), cell(r.get("count")), cell(r.get("missing")),
                           cell(r.get("total_ns")), cell(r.get("mean_ns")), cell(r.get("p50_ns")),
                           cell(r.get("max_ns")), cell(r.get("share_pct"), 1)))
        out.append("</tbody></table>")
        if self.warnings:
            out.append("<ul>%s</ul>" % "".join("<li>%s</li>" % esc(w) for w in self.warnings))
        out.append("</div>")
        return "\n".join(out)


def _meta_from_comments(comments: List[str]) -> Tuple[Dict[str, Any], List[str]]:
    meta: Dict[str, Any] = {}
    warnings: List[str] = []
    for line in comments:
        key, sep, value = line.lstrip("#").strip().partition(": ")
        if not sep:
            continue
        if key == "warning":
            warnings.append(value)
        elif key in meta:
            continue
        else:
            try:
                meta[key] = _number(value)
            except ValueError:
                meta[key] = value
    if "device" in meta and "device_name" not in meta:
        meta["device_name"] = str(meta["device"]).split(" (chip ")[0]
    if "kernels" in meta:
        meta.setdefault("kernel_count", meta["kernels"])
    return meta, warnings


def load(out_dir: "str | os.PathLike[str]", pandas: Optional[bool] = None,
         parquet: Optional[bool] = None) -> Report:
    """Loads the outputs gmprof wrote into ``out_dir`` (what :func:`gmprof.finish` returns).

    Reads the ranges, kernels and stats tables (all three required), report.json (for
    :attr:`Report.meta`; optional) and the pm table (:attr:`Report.pm`; optional). Each table
    comes from its ``.parquet`` file when pyarrow is installed and the run wrote one
    (``gmprof run --format``), else from its ``.csv`` file; :attr:`Report.formats` says which.
    ``pandas``: ``None`` gives DataFrames when pandas is installed, else lists of dicts;
    ``True`` requires pandas; ``False`` always gives lists. ``parquet``: ``None`` reads
    Parquet when pyarrow is installed; ``True`` requires pyarrow; ``False`` reads CSV only.

    A streamed run (report.json with a ``streamed`` section, or only part files) is read
    from its part files instead, with pyarrow (see :mod:`gmprof.streamed`): its ``ranges``,
    ``kernels``, ``transfers``, ``steps``, ``step_ranges`` and ``aggregates``; a corrupt
    part is named in :attr:`Report.skipped` and left out; further CUDA contexts' parts
    (``context-N/``) are in :attr:`Report.contexts`.

    Raises:
        ImportError: a streamed run without pyarrow (or with ``parquet=False``).
        FileNotFoundError: a required file is missing (a directory with one subdirectory per
            process needs ``gmprof merge`` first, or load each process's directory).
    """
    path = os.path.abspath(os.fspath(out_dir))
    pd = _pandas(pandas)
    pq = _pyarrow(parquet)
    tables: Dict[str, Tuple[List[str], Any]] = {}
    formats: Dict[str, str] = {}
    comments: List[str] = []
    parquet_meta: Optional[str] = None

    def read(name: str, required: bool) -> None:
        nonlocal comments, parquet_meta
        pq_file = os.path.join(path, name + ".parquet")
        csv_file = os.path.join(path, name + ".csv")
        if pq is not None and os.path.isfile(pq_file):
            header, rows, kv = _read_parquet(pq, pq_file, pd)
            tables[name] = (header, rows)
            formats[name] = "parquet"
            if name == "ranges":
                comments = ["# " + line for line in kv.get("gmprof.header", "").splitlines()]
                parquet_meta = kv.get("gmprof.meta")
            return
        if not os.path.isfile(csv_file):
            if not required:
                return
            wrote = "%s.csv" % name if pq is not None or not os.path.isfile(pq_file) else \
                "%s.csv (the run wrote %s.parquet: pip install pyarrow to read it)" % (name, name)
            raise FileNotFoundError(
                "%s: no %s; point gmprof.load at a directory gmprof wrote (with one directory per "
                "process, run `gmprof merge` first or load each process's directory)" % (path, wrote))
        header, rows, notes = _read_csv(csv_file)
        if name == "pm":
            for row in rows:
                if row.get("few_samples") in ("true", "false"):
                    row["few_samples"] = row["few_samples"] == "true"
        tables[name] = (header, rows)
        formats[name] = "csv"
        if name == "ranges":
            comments = notes

    report_json: Optional[Dict[str, Any]] = None
    json_file = os.path.join(path, "report.json")
    if os.path.isfile(json_file):
        with open(json_file, encoding="utf-8") as f:
            report_json = json.load(f)
    if is_streamed(path, report_json):
        return _load_streamed(path, report_json, pd, pq)
    for name in ("ranges", "kernels", "stats"):
        read(name, True)
    read("pm", False)
    if report_json is not None and isinstance(report_json.get("meta"), dict):
        meta = report_json["meta"]
        warnings = [str(w) for w in meta.get("warnings") or []]
    elif parquet_meta is not None:
        meta = json.loads(parquet_meta)
        warnings = [str(w) for w in meta.get("warnings") or []]
    else:
        meta, warnings = _meta_from_comments(comments)
    return Report(path, tables, meta, warnings, report_json, pd, formats)


def _load_streamed(path: str, report_json: Optional[Dict[str, Any]], pd: Any, pq: Any) -> Report:
    """A streamed run's :class:`Report` (see :mod:`gmprof.streamed`)."""
    tables, skipped, part_meta = read_streamed(path, pq, pd)
    if report_json is not None and isinstance(report_json.get("meta"), dict):
        meta = report_json["meta"]
    elif part_meta is not None:
        # A run killed before its report: what the parts say of it (mode, metrics, version).
        meta = json.loads(part_meta)
    else:
        meta = {}
    warnings = [str(w) for w in meta.get("warnings") or []]
    if report_json is not None and not report_json.get("streamed"):
        warnings.append("report.json is a checkpoint from before the rows were streamed (the run was killed after "
                        "the row limit): its meta is the checkpoint's, the tables are the part files'")
    formats = {name: "parquet parts" for name in tables}
    report = Report(path, tables, meta, warnings, report_json, pd, formats)
    report.stats = None
    report.streamed = (report_json or {}).get("streamed") or {}
    report.skipped = skipped
    report.contexts = [_load_streamed(c, None, pd, pq) for c in context_dirs(path)]
    return report
