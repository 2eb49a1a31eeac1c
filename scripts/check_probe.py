#!/usr/bin/env python3
"""Checks of `gmprof run --probe` outputs (scripts/gpu-probe-validate.sh).

  check_probe.py same PLAIN.txt PROBED.txt        outputs bit-identical (hash lines equal)
  check_probe.py gmem DIR N [NCU.csv]             vector_add/saxpy bytes == 12*N; ncu within 1 %
  check_probe.py sched DIR                        every block once, inside the kernel's interval
  check_probe.py overhead BASE_DIR DIR...         probed / plain kernel time per kernel
  check_probe.py kernels DIR                      probe_kernels.csv by status and reason

Prints what it compared and ends with PASS or FAIL lines; exits 1 on any FAIL.
"""
import csv
import statistics
import sys
from collections import defaultdict
from pathlib import Path

failed = False


def verdict(ok, what):
    global failed
    failed |= not ok
    print(("PASS " if ok else "FAIL ") + what)


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(l for l in f if not l.startswith("#")))


def hashes(path):
    return {l.split()[0]: l.split()[1] for l in Path(path).read_text().splitlines() if len(l.split()) == 2}


def same(plain, probed):
    a, b = hashes(plain), hashes(probed)
    for k in sorted(a):
        verdict(a[k] == b.get(k), f"{k}: plain {a[k]} probed {b.get(k)}")


def gmem(d, n, ncu=None):
    n = int(n)
    per = defaultdict(lambda: defaultdict(int))
    names = {}
    for r in rows(Path(d) / "probes.csv"):
        if r["probe"] == "gmem_bytes":
            per[r["correlation_id"]][r["field"]] += int(r["total"])
            names[r["correlation_id"]] = r["kernel"]
    for cid, f in sorted(per.items(), key=lambda x: int(x[0])):
        k = names[cid]
        total = f["read_bytes"] + f["written_bytes"]
        line = f"{k} (corr {cid}): read {f['read_bytes']} written {f['written_bytes']} total {total}"
        if k.startswith(("vector_add", "void saxpy<float>", "triton_poi_fused_add_mul_relu")):
            verdict(total == 12 * n, f"{line} == 12*N = {12 * n}")
        else:
            print("     " + line)
    if ncu:
        # ncu --csv --page raw: one row per kernel launch, metrics as columns.
        with open(ncu, newline="") as f:
            lines = [l for l in f if l.startswith('"')]
        table = list(csv.DictReader(lines))
        ld = "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum"
        st = "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum"
        order = [cid for cid in sorted(per, key=int)]
        data = [r for r in table if r.get(ld, "").replace(",", "").replace(".", "").isdigit()]
        for cid, r in zip(order, data):
            k = names[cid]
            ncu_ld = float(r[ld].replace(",", ""))
            ncu_st = float(r[st].replace(",", ""))
            p = per[cid]
            for what, ours, theirs in (("read", p["read_bytes"], ncu_ld), ("written", p["written_bytes"], ncu_st)):
                if theirs == 0 and ours == 0:
                    continue
                diff = abs(ours - theirs) / max(theirs, 1)
                verdict(diff <= 0.01, f"{k} {what}: probe {ours} ncu {theirs:.0f} ({diff * 100:.2f} %) [ncu kernel {r.get('Kernel Name', '?')[:40]}]")


def sched(d):
    """Every block once, and the blocks' span (first start to last end, %globaltimer) no longer
    than the kernel's activity interval. %globaltimer and CUPTI's timestamps are different
    clocks: their offset (printed, with its spread over the run's launches) is about a
    millisecond and moves by microseconds within a run, so absolute containment is shown
    after aligning with the run's median offset but not asserted."""
    kernels = {r["correlation_id"]: r for r in rows(Path(d) / "kernels.csv")}
    launches = [r for r in rows(Path(d) / "probe_launches.csv") if r["blocks_once"] != ""]
    offsets = []
    for r in launches:
        k = kernels.get(r["correlation_id"])
        if k and k["start_ns"] and r["first_block_start_ns"]:
            offsets.append(int(k["start_ns"]) - int(r["first_block_start_ns"]))
    offset = statistics.median(offsets) if offsets else 0
    if offsets:
        print(f"     clock offset (activity start - first block start): median {offset / 1e3:.1f} us, "
              f"spread {(max(offsets) - min(offsets)) / 1e3:.1f} us over {len(offsets)} launches")
    for r in launches:
        cid = r["correlation_id"]
        verdict(
            r["status"] == "probed" and int(r["blocks_once"]) == int(r["blocks"]) and r["blocks_missing"] == "0"
            and r["blocks_repeated"] == "0",
            f"{r['kernel'][:40]} (corr {cid}): {r['blocks_once']}/{r['blocks']} blocks once, {r['blocks_missing']} "
            f"missing, {r['blocks_repeated']} repeated ({r['status'][:60]})",
        )
        k = kernels.get(cid)
        if not (k and k["start_ns"] and r["first_block_start_ns"]):
            verdict(False, f"{r['kernel'][:40]} (corr {cid}): no activity interval in kernels.csv")
            continue
        s, e = int(k["start_ns"]), int(k["end_ns"])
        fs, le = int(r["first_block_start_ns"]) + offset, int(r["last_block_end_ns"]) + offset
        verdict(
            le - fs <= e - s,
            f"{r['kernel'][:40]} (corr {cid}): blocks span {(le - fs) / 1e3:.1f} us, activity {(e - s) / 1e3:.1f} us; "
            f"aligned, first block {(fs - s) / 1e3:+.2f} us after start, last block ends {(e - le) / 1e3:+.2f} us before end",
        )


def durations(d):
    out = defaultdict(list)
    for r in rows(Path(d) / "kernels.csv"):
        if r["duration_ns"]:
            out[r["kernel_name"]].append(int(r["duration_ns"]))
    return out


def overhead(base, *dirs):
    b = durations(base)
    for d in dirs:
        probed = {r["kernel"] for r in rows(Path(d) / "probe_kernels.csv") if r["status"] == "probed"}
        loads = {r["kernel"]: r["load_ms"] for r in rows(Path(d) / "probe_kernels.csv") if r["status"] == "probed"}
        for k, v in sorted(durations(d).items()):
            if k in probed and k in b:
                ratio = statistics.median(v) / statistics.median(b[k])
                print(f"     {Path(d).name}: {k[:40]:40} plain {statistics.median(b[k]) / 1e3:9.1f} us  probed "
                      f"{statistics.median(v) / 1e3:9.1f} us  x{ratio:6.2f}  load {float(loads[k]):7.1f} ms")


def kernels(d):
    by = defaultdict(list)
    for r in rows(Path(d) / "probe_kernels.csv"):
        by[(r["status"], r["detail"].split(";")[0][:90])].append(r["kernel"])
    for (status, detail), ks in sorted(by.items()):
        print(f"     {len(ks):4} {status:10} {detail}: {', '.join(k[:50] for k in ks[:3])}{' ...' if len(ks) > 3 else ''}")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"same": same, "gmem": gmem, "sched": sched, "overhead": overhead, "kernels": kernels}[cmd](*args)
    sys.exit(1 if failed else 0)
