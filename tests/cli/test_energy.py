#!/usr/bin/env python3
"""Energy and roofline in the reports (docs/ENERGY.md): every figure labelled with its kind and
source, never "measured" without a measurement; the totals add up; the energy table is the user's
choice and a bad one is a usage error; the roofline stays under its ceilings.

usage: test_energy.py TESSERA_BINARY
"""
import json
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from checks import check, every, finish  # noqa: E402 (the tests' shared module)

TESSERA = sys.argv[1]
PLAN = "0@model;1@cuda?gpu=h200&projected=1"  # an accelerator stage and a projected GPU stage
KINDS = {"modelled", "projected"}  # no GPU is measured here: projected=1


def run(*args):
    return subprocess.run([TESSERA, *args], capture_output=True, text=True, timeout=300)


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-30)


def run_json(*extra):
    r = run("run", "--model", "tiny", "--plan", PLAN, "--seq", "8", "--json", *extra)
    check(f"run {' '.join(extra)} exits 0", r.returncode == 0, r.stderr)
    return json.loads(r.stdout) if r.returncode == 0 else None


j = run_json()
if j:
    ops = j["ops"]
    energy = j["energy"]
    kinds = {}  # every label each device's ops carry
    for o in ops:
        kinds.setdefault(o["device"], set()).add(o.get("energy"))
    check("accelerator ops are modelled, every one", kinds.get("model:0") == {"modelled"}, kinds)
    gpu_kinds = [k for d, k in kinds.items() if d.startswith("cuda")]
    check("projected GPU ops are projected, every one", every(gpu_kinds, lambda k: k == {"projected"}), kinds)
    check("the host has no energy figure", "energy_j" not in next(o for o in ops if o["device"] == "host")
          and energy["not_counted"] == ["host"], energy["not_counted"])
    check("no figure says measured", every(ops, lambda o: o.get("energy") in KINDS | {None})
          and every(energy["devices"], lambda d: d["energy"] in KINDS))
    check("every device's figure names its source",
          every(energy["devices"], lambda d: d["source"].startswith(d["energy"] + ":")), energy["devices"])
    split_ok = every([o for o in ops if o.get("energy") == "modelled"],
                     lambda o: close(sum(o["energy_split"].values()), o["energy_j"]))
    check("an accelerator op's split adds up to its energy", split_ok)
    total = sum(o.get("energy_j", 0) for o in ops)
    check("totals.joules is the ops' sum", close(j["totals"]["joules"], total) and close(energy["joules"], total),
          (j["totals"]["joules"], total))
    check("j_per_token over batch x seq tokens", close(j["totals"]["j_per_token"], total / 8))
    macs = sum(o["macs"] for o in ops if "energy_j" in o)
    check("tops_per_w = 2 MACs / joules", close(j["totals"]["tops_per_w"], 2 * macs / total / 1e12))
    check("the energy table is named", energy["table"]["name"] == "7nm" and energy["table"]["node_nm"] == 7)
    roof = j["roofline"]
    check("the roofline has a point per op with MACs on both devices",
          {p["device"] for p in roof} == {"model:0", "cuda?gpu=h200&projected=1"}
          and all({"device", "op", "intensity", "achieved", "compute_ceiling", "memory_ceiling"} <= p.keys()
                  for p in roof), roof[:2])
    check("no op beats its device's compute ceiling",
          every(roof, lambda p: p["achieved"] <= p["compute_ceiling"] * (1 + 1e-9)))
    accel = [p for p in roof if p["device"] == "model:0"]
    hz = j["clock_mhz"] * 1e6
    check("the accelerator's ceilings are 2 R C and a beat per cycle at its clock",
          every(accel, lambda p: close(p["compute_ceiling"], 2 * 16 * 16 * hz) and close(p["memory_ceiling"], 32 * hz)))
    check("the clock is the default preset's estimated Fmax, said so",
          j["clock"].startswith("estimated: the default preset's Fmax") and 50 < j["clock_mhz"] < 1000, j["clock"])
    jc = run_json("--clock-mhz", "100")
    check("--clock-mhz gives the clock", jc and jc["clock_mhz"] == 100 and jc["clock"] == "given: --clock-mhz")

    # Each accelerator at its own configuration's clock: the int8-only default engine and its twin
    # with BF16 (default-bf16, a slower clock) in one plan; clock_mhz is the slowest.
    r = run("run", "--model", "tiny", "--plan", "0@model;1@model:1?precision=bf16", "--seq", "8", "--json")
    jm = json.loads(r.stdout) if r.returncode == 0 else {}
    clocks = jm.get("clocks", {})
    int8_mhz, bf16_mhz = (clocks.get(d, {}).get("mhz", 0) for d in ("model:0", "model:1?precision=bf16"))
    check("each accelerator has its own preset's clock, the slowest is clock_mhz",
          clocks.get("model:0", {}).get("source", "").startswith("estimated: the default preset's Fmax")
          and clocks.get("model:1?precision=bf16", {}).get("source", "").startswith("estimated: the default-bf16 preset")
          and int8_mhz > bf16_mhz > 0 and jm["clock_mhz"] == bf16_mhz, (clocks, r.stderr))
    accel_ops = [o for o in jm.get("ops", []) if o.get("cycles")]
    check("an accelerator op's time is its cycles at its own device's clock",
          {o["device"] for o in accel_ops} == set(clocks)
          and every(accel_ops, lambda o: close(o["seconds"], o["cycles"] / (clocks[o["device"]]["mhz"] * 1e6))),
          accel_ops[:2])

    # The table is the user's: 45 nm costs more than 7 nm; a table file derived from 45 nm with
    # factors of 1 gives the 45 nm figures exactly.
    j45 = run_json("--energy-table", "45nm")
    if j45:
        accel = lambda x: next(d for d in x["energy"]["devices"] if d["device"] == "model:0")  # noqa: E731
        accel_j = lambda x: accel(x)["joules"]  # noqa: E731
        # The same actions: the logic's energy scales by 0.068 from 45 nm to 7 nm, the HBM's not at all.
        s45, s7 = accel(j45)["split"], accel(j)["split"]
        check("7 nm's compute and on-chip energy are 45 nm's x 0.068, its DRAM energy the same",
              close(s7["compute"], s45["compute"] * 0.068) and close(s7["onchip"], s45["onchip"] * 0.068)
              and close(s7["dram"], s45["dram"]), (s45, s7))
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp) / "mine.json"
            path.write_text(json.dumps({"name": "mine", "node_nm": 45, "description": "45 nm as shipped",
                                        "derived_from": "45nm",
                                        "scale": {"energy": 1, "area": 1, "source": "unchanged"}}))
            jm = run_json("--energy-table", str(path))
            check("a table file is used", jm and jm["energy"]["table"]["name"] == "mine"
                  and close(accel_j(jm), accel_j(j45)), jm and jm["energy"]["table"])
            path.write_text('{"name": "broken"')
            r = run("run", "--model", "tiny", "--plan", "0-1@model", "--energy-table", str(path))
            check("a broken table file is a usage error", r.returncode == 2 and "not JSON" in r.stderr, r.stderr)
    r = run("run", "--model", "tiny", "--plan", "0-1@model", "--energy-table", "3nm")
    check("an unknown table is a usage error naming the shipped ones",
          r.returncode == 2 and "45nm, 16nm, 7nm" in r.stderr, r.stderr)

# generate: per phase; bench: per result.
r = run("generate", "--model", "tiny", "--tokens", "1,2,3", "--max-new-tokens", "3", "--plan", PLAN, "--json")
check("generate exits 0", r.returncode == 0, r.stderr)
if r.returncode == 0:
    g = json.loads(r.stdout)
    e = g["energy"]
    check("generate has prefill and decode energy", e["prefill"]["joules"] > 0 and e["decode"]["joules"] > 0)
    check("prefill J/token over the prompt's 3 tokens", close(e["prefill"]["j_per_token"], e["prefill"]["joules"] / 3))
    check("decode J/token over the 2 decoded tokens", close(e["decode"]["j_per_token"], e["decode"]["joules"] / 2))
    check("generate's roofline points carry their phase", g["roofline"]
          and {p["phase"] for p in g["roofline"]} == {"prefill", "decode"})
r = run("bench", "--model", "tiny", "-p", "8", "-n", "2", "--plan", "0-1@model", "-o", "json")
check("bench exits 0", r.returncode == 0, r.stderr)
if r.returncode == 0:
    b = json.loads(r.stdout)
    res = b["results"]
    check("bench has J/token and TOPS/W per result, modelled",
          every(res, lambda x: x["energy"] == "modelled" and x["j_per_token"] > 0 and x["tops_per_w"] > 0
                and close(x["j_per_token"], x["joules"] / (x["batch"] * x["tokens"]))), res)
    check("bench names its energy table", b["energy_table"] == "7nm")

# scripts/plot draws the rooflines of several runs together.
PLOT = pathlib.Path(__file__).resolve().parents[2] / "scripts/plot"
with tempfile.TemporaryDirectory() as tmp:
    tmp = pathlib.Path(tmp)
    for name, plan in (("accel", "0-1@model"), ("gpu", "0-1@cuda?gpu=h200&projected=1")):
        r = run("run", "--model", "tiny", "--plan", plan, "--seq", "8", "--json")
        (tmp / f"{name}.json").write_text(r.stdout)
    p = subprocess.run([sys.executable, PLOT, "--roofline", tmp / "accel.json", tmp / "gpu.json", "-o", tmp / "r.svg"],
                       capture_output=True, text=True)
    svg = (tmp / "r.svg").read_text() if (tmp / "r.svg").exists() else ""
    check("scripts/plot --roofline draws both devices' roofs and ops",
          p.returncode == 0 and "model:0: roof" in svg and "cuda?gpu=h200&amp;projected=1: ops" in svg, p.stderr + svg[:300])
    (tmp / "bad.json").write_text('{"schema_version": 1}')
    p = subprocess.run([sys.executable, PLOT, "--roofline", tmp / "bad.json", "-o", tmp / "b.svg"],
                       capture_output=True, text=True)
    check("scripts/plot --roofline refuses a JSON without a roofline", p.returncode != 0 and "roofline" in p.stderr,
          p.stderr)
finish()
