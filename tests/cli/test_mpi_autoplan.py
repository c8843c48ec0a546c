#!/usr/bin/env python3
"""--plan auto under mpirun: the ranks time their all-reduces, rank 0 plans, every rank runs its
plan; every device on a rank of the run, every accelerator counting the cycles predicted for it, the
ranks of a stage counting its all-reduces alike, the traffic as the plan predicts, and bad input
stopping every rank with exit 2.

usage: test_mpi_autoplan.py MPIEXEC TESSERA
GPT-2 small's shapes, batch 4 of 32 tokens, a model device per rank. (The time per batch against the
prediction is a figure of scripts/bench-scaling --auto: with more ranks than cores, the run's
all-reduces take longer than the planner's timing of them, by an amount that varies with the
scheduling; docs/SCALEOUT.md.)"""
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from checks import check, every, finish  # noqa: E402 (the tests' shared module)

MPIEXEC, TESSERA = sys.argv[1], sys.argv[2]
os.environ["TESSERA_CALIBRATION_DIR"] = tempfile.mkdtemp()  # none of the user's calibrations
GPT2_SMALL = ["--model", "random:12,768,12,50257,1024", "--batch", "4", "--seq", "32"]


def rank_of(device):
    m = re.match(r"r(\d+):", device)
    return int(m.group(1)) if m else None


def mpirun(n, *args):
    return subprocess.run([MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np", str(n), TESSERA, *args],
                          capture_output=True, text=True, timeout=900, env=os.environ)


for n in (2, 4):
    r = mpirun(n, "run", "--plan", "auto", *GPT2_SMALL, "--json")
    check(f"{n} ranks: run --plan auto exits 0", r.returncode == 0, r.stderr[-2000:])
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    auto = j.get("auto", {})
    devices = [d["device"] for st in auto.get("stages", []) for d in st["devices"]]
    ran_on = {dev: k["rank"] for k in j.get("mpi", {}).get("ranks", []) for dev in k["devices"]}
    print(f"{n} ranks: plan {auto.get('plan')}, {auto.get('microbatches')} microbatch(es), ran on {ran_on}")
    check(f"{n} ranks: every device of the plan on a rank of the run, and run by the rank it names",
          every(devices, lambda d: rank_of(d) is not None and 0 <= rank_of(d) < n and ran_on.get(d) == rank_of(d)),
          (devices, ran_on))
    cycles = auto.get("device_cycles", [])
    check(f"{n} ranks: every device counted the cycles predicted for it",
          sorted(c["device"] for c in cycles) == sorted(devices)
          and every(cycles, lambda c: c["predicted"] == c["counted"] > 0), cycles)
    # Each all-reduce counts at its fastest rank's time: the same on every rank of a stage. The
    # ranks that all-reduce are exactly those of the stages that span ranks.
    allreduce = {}
    for o in j.get("ops", []):
        if o["op"] == "allreduce":
            allreduce.setdefault(rank_of(o["device"]), []).append((o["calls"], o["bytes"], o["seconds"]))
    spanning = [{rank_of(d["device"]) for d in st["devices"]} for st in auto.get("stages", [])]
    spanning = [ranks for ranks in spanning if len(ranks) > 1]
    check(f"{n} ranks: the ranks of a stage count its all-reduces alike (calls, bytes, time), and only they "
          "all-reduce", set(allreduce) == set().union(*spanning)
          and all(len({tuple(allreduce.get(k, [])) for k in ranks}) == 1 for ranks in spanning), allreduce)
    if not spanning:
        print(f"     {n} ranks: no stage spans ranks, so no all-reduce to compare")
    ranks = j.get("mpi", {}).get("ranks", [])
    check(f"{n} ranks: every rank sent what the plan predicts",
          len(ranks) == n and all(k["bytes_sent"] == k["predicted_bytes_sent"] for k in ranks), json.dumps(ranks))

r = mpirun(2, "run", "--plan", "auto", "--devices", "model:0?mem_mb=1,model:1?mem_mb=1", *GPT2_SMALL)
check("2 ranks, devices too small: every rank stops with exit 2 naming the bytes",
      r.returncode == 2 and "more than its" in r.stderr, (r.returncode, r.stderr[-1000:]))

finish()
