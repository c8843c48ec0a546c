#!/usr/bin/env python3
"""The accelerator next to the GPU, end to end through `tessera run --json`: the tiny model and a
GPT-2-small-shaped layer on the model accelerator and on the GPU in each precision, and a pipeline
of both. Every op of a cuda device must be measured (a run that fell back to a projection fails),
its energy measured through NVML where the driver has it (a board power in watts that makes sense),
and the logits must meet the numerics targets against fp32 on the CPU: relative L2 <= 1e-4 in fp32,
cosine >= 0.995 in bf16 and int8. Then a calibration of the GPU and a --plan auto run over it and the
accelerator model, its costs labelled calibrated. Prints each run's figures and the auto plan's
prediction beside its measurement.

usage: check_runs.py TESSERA        exit 77 (skipped) where there is no GPU, 1 under TESSERA_REQUIRE_GPU=1"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from checks import check, every, finish, no_gpu_exit  # noqa: E402 (the tests' shared module)

TESSERA = sys.argv[1]


def tessera(*args):
    return subprocess.run([TESSERA, *args], capture_output=True, text=True, timeout=900)


def numerics_ok(precision, num):
    return num.get("rel_l2", 1) <= 1e-4 if precision == "fp32" else num.get("cosine", 0) >= 0.995


def run(name, plan, precision, *args):
    r = tessera("run", "--plan", plan, "--json", *args)
    if r.returncode:
        check(name, False, r.stdout[-500:] + r.stderr)
        return
    j = json.loads(r.stdout)
    gpu = [o for o in j["ops"] if o["device"].startswith("cuda")]
    on_gpu = "cuda" in plan
    if on_gpu:  # a plan with a GPU stage that ran no GPU op has measured nothing
        check(f"{name}: GPU ops ran, every one measured, none projected", every(gpu, lambda o: o["time"] == "measured"),
              json.dumps(sorted({(o["device"], o["op"], o["time"]) for o in gpu})))
    # Their energy: the board's energy counter (NVML) over the run; where NVML cannot be read (a
    # driver without it) the run says projected, and this says so rather than fail: the measurement
    # is not the run. The board's power over the run, idle or not, is between 10 W and 2 kW.
    energy = {d["device"]: d for d in j["energy"]["devices"] if d["device"].startswith("cuda")}
    if on_gpu:
        check(f"{name}: an energy figure for every GPU that ran ops",
              {o["device"] for o in gpu} <= energy.keys(), json.dumps(energy))
    if energy and all(d["energy"] == "measured" for d in energy.values()):
        check(f"{name}: GPU energy measured through NVML, a plausible board power, above idle no more than the board's",
              every(energy.values(), lambda e: 0 < e["board_joules"] and e["phase_seconds"] > 0
                    and 10 < e["board_joules"] / e["phase_seconds"] < 2000
                    and (e["above_idle_joules"] is None or e["above_idle_joules"] <= e["board_joules"])),
              json.dumps(energy))
    elif energy:
        print(f"     GPU energy not measured: {json.dumps(energy)}")
    num = j["numerics"]
    target = "relative L2 <= 1e-4" if precision == "fp32" else "cosine >= 0.995"
    check(f"{name}: numerics against fp32 on the CPU within {target}", numerics_ok(precision, num), json.dumps(num))
    by_device = {}
    for o in j["ops"]:
        by_device[o["device"]] = by_device.get(o["device"], 0) + o["seconds"]
    times = ", ".join(f"{d} {s * 1e3:.2f} ms" for d, s in sorted(by_device.items()))
    print(f"     {plan} {' '.join(args)}: makespan {j['totals']['seconds'] * 1e3:.2f} ms; {times}; "
          f"rel_l2 {num['rel_l2']:.3g}, cosine {num['cosine']:.6f}, top-1 {num['top1_agreement']:.4f}", flush=True)


devices = json.loads(tessera("devices", "--json").stdout)["devices"]
gpus = [d for d in devices if d["kind"] == "cuda" and d["available"]]
if not gpus:
    reason = next((d.get("reason", "") for d in devices if d["kind"] == "cuda"), "no cuda entry")
    no_gpu_exit(reason)
for g in gpus:
    print(f"{g['spec']}: {g['name']}, {g['mem_bytes'] >> 20} MiB, compute capability {g['compute_capability']}")

for precision in ("fp32", "bf16", "int8"):
    run(f"tiny model on the GPU ({precision})", f"0-1@cuda:0?precision={precision}", precision,
        "--batch", "4", "--seq", "64")
run("tiny model on the accelerator model", "0-1@model", "int8", "--batch", "4", "--seq", "64")
run("a pipeline: layer 0 on the accelerator, layer 1 on the GPU in int8", "0@model;1@cuda:0?precision=int8", "int8",
    "--batch", "4", "--seq", "64", "--microbatches", "2")
run("a stage sharded over the accelerator and the GPU", "0-1@model*1+cuda:0?precision=int8*3", "int8",
    "--batch", "4", "--seq", "64")
gpt2_layer = ("--model", "random:1,768,12,50257,1024", "--seq", "128")
for precision in ("fp32", "bf16", "int8"):
    run(f"a GPT-2-small-shaped layer at 128 tokens on the GPU ({precision})", f"0@cuda:0?precision={precision}",
        precision, *gpt2_layer)
run("a GPT-2-small-shaped layer at 128 tokens on the accelerator model", "0@model", "int8", *gpt2_layer)

# --plan auto with the GPU measured: a calibration of it, then a plan over it and the accelerator
# model, run against its prediction (printed: the GPU's times are wall times of a first run).
with tempfile.TemporaryDirectory() as cache:
    env = {**os.environ, "TESSERA_CALIBRATION_DIR": cache}
    small = ("--model", "random:12,768,12,50257,1024", "--batch", "4", "--seq", "32")
    r = subprocess.run([TESSERA, "calibrate", "--device", "cuda:0?precision=int8", *small, "--json"],
                       capture_output=True, text=True, timeout=900, env=env)
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    check("calibrate --device cuda:0 writes the GPU's file", r.returncode == 0 and any("cuda-" in f for f in j.get("files", [])),
          r.stdout[-500:] + r.stderr)
    r = subprocess.run([TESSERA, "run", "--plan", "auto", "--devices", "model:0,cuda:0?precision=int8", *small, "--json"],
                       capture_output=True, text=True, timeout=900, env=env)
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    auto = j.get("auto", {})
    sources = [d["cost_source"] for st in auto.get("stages", []) for d in st["devices"] if d["device"].startswith("cuda")]
    # The GPU in the plan (a calibrated GPU is many times the accelerator model's speed at these
    # shapes, so a plan without it would be a wrong plan), with its costs from the calibration.
    check("run --plan auto over the accelerator model and the GPU: the GPU in the plan, its costs calibrated",
          r.returncode == 0 and every(sources, lambda s: s.startswith("calibrated")),
          json.dumps(auto.get("plan")) + r.stdout[-500:] + r.stderr)
    for c in auto.get("checks", []):
        print(f"     auto plan {auto['plan']}: {c['what']} predicted {c['predicted_s'] * 1e3:.3f} ms, measured "
              f"{c['measured_s'] * 1e3:.3f} ms ({c['error'] * 100:+.1f}%)", flush=True)

finish()
