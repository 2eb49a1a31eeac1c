"""Comparing two runs from Python: :func:`diff`, the ``gmprof diff`` command's rows.

``gmprof.diff(base, new)`` runs the installed ``gmprof`` command (the wheel's, or a
checkout's ``target/``) with ``diff BASE NEW --csv -`` and returns its rows: a
:class:`pandas.DataFrame` when pandas is installed (``pandas=False`` for lists of dicts),
one row per range group or kernel and quantity, with ``verdict`` saying whether the change
is beyond noise (``slower``/``faster``/``higher``/``lower``) or not (``noise``,
``too_few``, ``unmeasured``), and ``only_base``/``only_new`` rows for what ran on one side.
The method and any not-comparable warnings are in ``df.attrs["comments"]`` (the CSV's
``#`` lines). A value that was not measured or not tested is ``None``/``NaN``, never 0.

A streamed run (its rows in part files) is compared from its aggregates: GPU time per range
group and kernel, the change of the mean, ``p_value`` blank (no rank test without the
instances' values); the method comment says so.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from typing import Any, List, Optional, Union

from .report import _pandas, _read_csv

__all__ = ["diff"]

PathLike = Union[str, "os.PathLike[str]"]


def diff(
    base: PathLike,
    new: PathLike,
    skip_first: int = 0,
    threshold: float = 2.0,
    min_impact: float = 0.1,
    alpha: float = 0.05,
    group_by: str = "path",
    pandas: Optional[bool] = None,
) -> Any:
    """The rows of ``gmprof diff BASE NEW`` (see the module doc).

    ``skip_first`` leaves out the first instances of each repeated range as warm-up,
    ``threshold`` is the smallest change of the median (percent) that is marked,
    ``min_impact`` the smallest impact of a GPU time change on the total (percent), ``alpha``
    the rank tests' family-wise level and ``group_by`` ``path`` or ``name``. Raises
    ``RuntimeError`` with the command's message when it fails (a missing directory, say).
    """
    from .__main__ import find_executable

    exe = find_executable()
    if exe is None:
        raise RuntimeError(
            "gmprof.diff needs the gmprof command-line tool: install the wheel (pip install gmprof-*.whl) "
            "or build it with `cargo build --release`"
        )
    with tempfile.TemporaryDirectory(prefix="gmprof-diff-") as tmp:
        out = os.path.join(tmp, "diff.csv")
        args: List[str] = [
            exe, "diff", os.fspath(base), os.fspath(new), "--csv", out,
            "--skip-first", str(int(skip_first)), "--threshold", repr(float(threshold)),
            "--min-impact", repr(float(min_impact)), "--alpha", repr(float(alpha)), "--group-by", group_by,
        ]
        done = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise RuntimeError("gmprof diff failed (status %d): %s" % (done.returncode, done.stderr.strip()))
        header, rows, comments = _read_csv(out)
    pd = _pandas(pandas)
    if pd is None:
        return rows
    frame = pd.DataFrame(rows, columns=header)
    frame.attrs["comments"] = [c[1:].strip() for c in comments]
    return frame
