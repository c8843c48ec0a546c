#!/usr/bin/env python3
"""--plan auto and tessera plan --auto (docs/RUNTIME.md, "Auto plans"): the JSON, a plan that reads
back, runs whose accelerators counted exactly the cycles the planner predicted for them, and the
bad-input errors. (How close the predicted time per batch comes to the run's, host work included, is
a figure of scripts/bench-scaling --auto: it depends on the machine.)

usage: test_autoplan.py TESSERA_BINARY
Prints one line per check and 'N passed, N failed' at the end."""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from checks import check, every, finish  # noqa: E402 (the tests' shared module)

TESSERA = sys.argv[1]
os.environ["TESSERA_CALIBRATION_DIR"] = tempfile.mkdtemp()  # none of the user's calibrations
MODEL = "random:4,256,4,2048,128"


def exact_cycles(what, j):
    """Every accelerator of the plan counted the cycles the planner predicted for it, and the run
    compared its time with the prediction."""
    auto = j.get("auto", {})
    cycles = auto.get("device_cycles", [])
    print(f"{what}: plan {auto.get('plan')},", [(c["device"], c["predicted"], c["counted"]) for c in cycles],
          [(c["what"], round(c["predicted_s"], 6), round(c["measured_s"], 6)) for c in auto.get("checks", [])])
    devices = {d["device"] for st in auto.get("stages", []) for d in st["devices"]}
    check(f"{what}: every device of the plan counted the cycles predicted for it",
          {c["device"] for c in cycles} == devices and every(cycles, lambda c: c["predicted"] == c["counted"] > 0),
          cycles)
    check(f"{what}: the time predicted and measured, side by side",
          every(auto.get("checks", []), lambda c: c["predicted_s"] > 0 and c["measured_s"] > 0), auto.get("checks"))


def run(*args, env=None):
    return subprocess.run([TESSERA, *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


def as_json(r, what):
    check(f"{what}: exit 0", r.returncode == 0, r.stderr[-2000:])
    return json.loads(r.stdout) if r.returncode == 0 else {}


# tessera plan --auto --json: the keys, and a plan that tessera plan reads back as it was printed.
j = as_json(run("plan", "--auto", "--devices", "model:0,model:1?preset=large", "--model", MODEL, "--batch", "4",
                "--seq", "16", "--json"), "plan --auto --json")
keys = {"schema_version", "model", "plan", "phase", "batch", "seq", "microbatches", "clock_mhz", "clock", "stages",
        "bubble", "predicted", "even_split", "speedup_over_even", "unused_devices", "search"}
check("plan --auto --json has its keys", keys <= j.keys(), sorted(keys - j.keys()))
device_keys = {"device", "kind", "heads", "mlp_columns", "vocab_rows", "weight_bytes", "kv_cache_bytes",
               "activation_bytes", "memory_capacity", "cost_source"}
devs = [d for st in j.get("stages", []) for d in st["devices"]]
check("every device has its shares, memory and cost source", devs and all(device_keys <= d.keys() for d in devs))
check("the memory needed fits the capacity",
      all(d["weight_bytes"] + d["kv_cache_bytes"] + d["activation_bytes"] <= d["memory_capacity"] for d in devs))
check("the auto plan is no slower than the even split (half a percent of ties)",
      j.get("speedup_over_even") is not None and j["speedup_over_even"] >= 0.995, j.get("speedup_over_even"))
if j:
    again = as_json(run("plan", "--plan", j["plan"], "--model", MODEL, "--json"), "the auto plan read back")
    check("the auto plan reads back as printed", again.get("plan") == j["plan"], (again.get("plan"), j["plan"]))

r = run("plan", "--plan", "auto", "--devices", "model:0,model:1", "--model", MODEL, "--batch", "2", "--seq", "8")
check("plan --plan auto prints the plan to pin", r.returncode == 0 and '--plan "' in r.stdout, r.stderr[-2000:])

# Runs against their predictions: two presets sharing a stage, then a generation.
j = as_json(run("run", "--plan", "auto", "--devices", "model:0,model:1?preset=large", "--model", MODEL, "--batch",
                "4", "--seq", "32", "--json"), "run --plan auto")
exact_cycles("run --plan auto", j)
check("run --plan auto: the report names the plan it ran", j.get("plan") == j.get("auto", {}).get("plan"))
prompt = ",".join(str((i * 37 + 11) % 2048) for i in range(32))
j = as_json(run("generate", "--plan", "auto", "--devices", "model:0,model:1", "--model", MODEL, "--tokens", prompt,
                "--max-new-tokens", "6", "--json"), "generate --plan auto")
check("generate --plan auto: time to first token and decode per token compared",
      [c["what"] for c in j.get("auto", {}).get("checks", [])] == ["time to first token", "decode per token"],
      j.get("auto", {}).get("checks"))
exact_cycles("generate --plan auto", j)
# A plan with a CPU stage has no cycles to hold for every device: it says none.
j = as_json(run("run", "--plan", "auto", "--devices", "model:0,cpu", "--model", MODEL, "--batch", "2", "--seq", "8",
                "--json"), "run --plan auto over a CPU")
plan_devices = {d["device"] for st in j.get("auto", {}).get("stages", []) for d in st["devices"]}
check("run --plan auto: cycles held only where every device counts them",
      j.get("auto", {}).get("device_cycles") == [] if "cpu" in plan_devices
      else every(j.get("auto", {}).get("device_cycles", []), lambda c: c["predicted"] == c["counted"]),
      (plan_devices, j.get("auto", {}).get("device_cycles")))

# tessera calibrate: the CPU's and the host's times kept, and a plan that uses them says so.
with tempfile.TemporaryDirectory() as cache:
    env = {"TESSERA_CALIBRATION_DIR": cache}
    j = as_json(run("calibrate", "--device", "cpu", "--model", MODEL, "--batch", "2", "--seq", "8", "--json", env=env),
                "calibrate --device cpu")
    files = j.get("files", [])
    check("calibrate writes the CPU's and the host's files there",
          sorted(pathlib.Path(f).name for f in files) == ["cpu.json", "host.json"] and
          all(pathlib.Path(f).parent == pathlib.Path(cache) for f in files), files)
    j = as_json(run("plan", "--auto", "--devices", "model:0,cpu", "--model", MODEL, "--batch", "2", "--seq", "8",
                    "--json", env=env), "plan --auto with a calibrated CPU")
    sources = {d["device"]: d["cost_source"] for st in j.get("stages", []) for d in st["devices"]}
    check("the plan's CPU and host costs are labelled calibrated",
          j.get("host_cost_source", "").startswith("calibrated") and
          all(s.startswith("calibrated") for d, s in sources.items() if d == "cpu"), (sources, j.get("host_cost_source")))
    r = run("calibrate", "--device", "model:0", env=env)
    check("calibrate --device model:0 says an accelerator needs none", r.returncode == 0 and "needs no calibration" in r.stdout,
          r.stderr)

# Bad input: exit 2 with the reason.
bad = [
    (["run", "--plan", "auto", "--model", MODEL], "needs --devices"),
    (["run", "--devices", "model:0", "--model", MODEL], "--devices goes with --plan auto"),
    (["run", "--plan", "auto,0-3@model:0", "--devices", "model:0", "--model", MODEL], "no other plans"),
    (["run", "--plan", "auto", "--devices", "gpu:0", "--model", MODEL], "gpu"),
    (["run", "--plan", "auto", "--devices", "model:0,model:0", "--model", MODEL], "listed twice"),
    (["plan", "--auto", "--devices", "model:0,xdma:/dev/xdma97", "--model", MODEL], "cannot be opened"),
    (["eval", "--plan", "auto", "--model", MODEL, "--text", __file__], "run, generate and plan"),
    (["plan", "--auto", "--devices", "model:0?mem_mb=1", "--model", "random:4,512,8,2048,128"], "more than its"),
    (["plan", "--auto", "--devices", "model:0", "--model", MODEL, "--phase", "decode"], "new tokens"),
    (["plan", "--auto", "--devices", "model:0", "--model", MODEL, "--phase", "generate", "--batch", "2"], "--batch 1"),
    (["plan", "--auto", "--devices", "model:0", "--model", MODEL, "--phase", "training"], "prefill, decode or generate"),
    (["plan", "--devices", "model:0", "--model", MODEL], "--devices goes with --plan auto"),
    (["plan", "--model", MODEL, "--phase", "decode"], "--phase goes with --auto"),
    (["calibrate", "--model", MODEL], "give the device"),
    (["calibrate", "--device", "gpu:0"], "gpu"),
]
for args, reason in bad:
    r = run(*args)
    check(f"{' '.join(args[:3])} ... exits 2 naming '{reason}'", r.returncode == 2 and reason in r.stderr,
          (r.returncode, r.stderr[-500:]))

finish()
