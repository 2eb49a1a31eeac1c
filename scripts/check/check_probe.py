#!/usr/bin/env python3
"""Checks of `gmprof run --probe` outputs (scripts/gpu/probe-validate.sh).

  check_probe.py same PLAIN.txt PROBED.txt        outputs bit-identical (hash lines equal)
  check_probe.py gmem DIR N [NCU.csv]             vector_add/saxpy bytes == 12*N; ncu within 1 %
  check_probe.py sched DIR                        every block once, joined, inside the kernel's interval
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
    """Every block once; the launch joined to its kernel row (kernels.csv's probe_status);
    and every block inside the kernel's activity interval. %globaltimer and CUPTI's
    timestamps are different clocks: gmprof fits their offset with the device timers' clock
    (runs of consecutive launches whose brackets agree, probe_launches.csv's clock_* columns)
    and says per launch whether the blocks lie inside their kernel under it
    (blocks_inside_kernel). Launches listed as not probed (the original ran) are shown."""
    kernels = {r["correlation_id"]: r for r in rows(Path(d) / "kernels.csv")}
    all_launches = rows(Path(d) / "probe_launches.csv")
    for r in all_launches:
        if r["status"].startswith("not probed"):
            print(f"     not probed (the original ran): {r['kernel'][:40]} (corr {r['correlation_id']}): {r['status'][:120]}")
    launches = [r for r in all_launches if r["blocks_once"] != ""]
    runs = [int(r["clock_run_launches"]) for r in launches if r.get("clock_run_launches")]
    offsets = [int(r["clock_offset_ns"]) for r in launches if r.get("clock_offset_ns")]
    if offsets:
        print(f"     clock fit: offset (CUPTI - %globaltimer) {min(offsets) / 1e3:.1f} .. {max(offsets) / 1e3:.1f} us, "
              f"slack <= {max(int(r['clock_slack_ns']) for r in launches if r.get('clock_slack_ns'))} ns, "
              f"{len(launches)} launches in runs of {min(runs)}..{max(runs)}")
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
        verdict(k.get("probe_status") == r["status"], f"{r['kernel'][:40]} (corr {cid}): kernels.csv row has "
                f"probe_status {k.get('probe_status')!r}, range {r.get('range_path')!r}")
        s, e = int(k["start_ns"]), int(k["end_ns"])
        span = int(r["last_block_end_ns"]) - int(r["first_block_start_ns"])
        off = int(r["clock_offset_ns"] or 0)
        fs, le = int(r["first_block_start_ns"]) + off, int(r["last_block_end_ns"]) + off
        verdict(
            r.get("blocks_inside_kernel") == "true" and s <= fs and le <= e,
            f"{r['kernel'][:40]} (corr {cid}): blocks span {span / 1e3:.1f} us, activity {(e - s) / 1e3:.1f} us; "
            f"placed, first block {(fs - s) / 1e3:+.2f} us after start, last ends {(e - le) / 1e3:+.2f} us before end "
            f"(run of {r['clock_run_launches']}, slack {r['clock_slack_ns']} ns)",
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
        # One row per variant of a kernel name: the name's load time is its probed variants'.
        loads = defaultdict(float)
        for r in rows(Path(d) / "probe_kernels.csv"):
            if r["status"] == "probed":
                loads[r["kernel"]] += float(r["load_ms"])
        for k, v in sorted(durations(d).items()):
            if k in probed and k in b:
                ratio = statistics.median(v) / statistics.median(b[k])
                print(f"     {Path(d).name}: {k[:40]:40} plain {statistics.median(b[k]) / 1e3:9.1f} us  probed "
                      f"{statistics.median(v) / 1e3:9.1f} us  x{ratio:6.2f}  load {loads[k]:7.1f} ms")


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
