"""``python -m gmprof ARGS...``: runs the ``gmprof`` command-line tool with ARGS.

The wheel installs the tool (a Rust binary) into the environment's scripts directory
(``bin/``). This finds it there (or, in a source checkout, in ``target/release`` or
``target/debug``, else on ``PATH``), exports the lib directories of NVIDIA's pip wheels in
``$GMPROF_CUDA_LIB_DIRS`` and replaces this process with it, so exit codes and signals
pass through unchanged.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from typing import List, Optional

from . import _PACKAGE_DIR, _export_cuda_lib_dirs, _repo_root


def executable_candidates() -> List[str]:
    """Where the ``gmprof`` binary is looked for, in order."""
    out: List[str] = []
    schemes = [None, "%s_user" % os.name]
    for scheme in schemes:
        try:
            scripts = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        if scripts:
            out.append(os.path.join(scripts, "gmprof"))
    root = _repo_root(_PACKAGE_DIR)
    if root is not None:
        for profile in ("release", "debug"):
            out.append(os.path.join(root, "target", profile, "gmprof"))
    return out


def find_executable() -> Optional[str]:
    """The first ``gmprof`` binary of :func:`executable_candidates`, else one on ``PATH``."""
    for path in executable_candidates():
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return shutil.which("gmprof")


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    exe = find_executable()
    if exe is None:
        sys.stderr.write(
            "gmprof: the gmprof command-line tool was not found (tried %s and PATH); install the "
            "wheel (pip install gmprof-*.whl) or build it with `cargo build --release`\n"
            % ", ".join(executable_candidates())
        )
        return 127
    _export_cuda_lib_dirs()
    os.execv(exe, [exe] + list(args))
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
