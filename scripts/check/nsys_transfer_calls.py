"""Runtime and driver memcpy/memset calls that no GPU memcpy or memset record answers, read
from an Nsight Systems export (`nsys export --type sqlite`): for comparing with what gmprof
says of its own calls without an activity record (issue 43, item 5).

    python3 scripts/check/nsys_transfer_calls.py REPORT.sqlite

Prints each such call's API, return value, thread, the kernels launched just before and
after it, and, when the report has CUDA call chains (`--cudabacktrace`), its top frames.
"""

import sqlite3
import sys
from collections import Counter


def tables(db):
    return {r[0] for r in db.execute("select name from sqlite_master where type='table'")}


def main(path):
    db = sqlite3.connect(path)
    have = tables(db)
    names = dict(db.execute("select id, value from StringIds"))
    answered = set()
    for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if t in have:
            answered |= {r[0] for r in db.execute(f"select correlationId from {t}")}
    kernels = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in have:
        kernels = sorted(db.execute("select correlationId, shortName from CUPTI_ACTIVITY_KIND_KERNEL"))
    calls = []
    for t in ("CUPTI_ACTIVITY_KIND_RUNTIME",):
        if t not in have:
            continue
        cols = {r[1] for r in db.execute(f"pragma table_info({t})")}
        chain = "callchainId" if "callchainId" in cols else "NULL"
        for cid, name_id, ret, tid, start, cc in db.execute(
            f"select correlationId, nameId, returnValue, globalTid, start, {chain} from {t} order by start"
        ):
            name = names.get(name_id, "?")
            if ("Memcpy" in name or "Memset" in name) and "Graph" not in name and cid not in answered:
                calls.append((cid, name, ret, tid, start, cc))
    total = Counter(c[1] for c in calls)
    print(f"{len(calls)} runtime memcpy/memset call(s) without a memcpy or memset record: {dict(total)}")
    kernel_ids = [k[0] for k in kernels]
    import bisect

    for cid, name, ret, tid, start, cc in calls[:40]:
        i = bisect.bisect_left(kernel_ids, cid)
        before = names.get(kernels[i - 1][1], "?")[:60] if i > 0 else "-"
        after = names.get(kernels[i][1], "?")[:60] if i < len(kernels) else "-"
        print(f"  corr {cid} {name} ret={ret} tid={tid & 0xFFFFFF} | before: {before} | after: {after}")
        if cc is not None and "CUDA_CALLCHAINS" in have:
            frames = db.execute(
                "select symbol from CUDA_CALLCHAINS where id = ? order by stackDepth limit 14", (cc,)
            ).fetchall()
            for (sym,) in frames:
                print(f"      {names.get(sym, sym)}"[:160])


if __name__ == "__main__":
    main(sys.argv[1])
