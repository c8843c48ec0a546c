"""The CPU baseline's BLAS threads: what the cpu device chooses and reports, --cpu-threads and
OPENBLAS_NUM_THREADS over it, the share of MPI ranks on one host, and a decode beside a busy process
whose per-token times keep no outliers (split over threads that the neighbour preempts, a kjv-tiny
decode token took 60x its time: docs/PERFORMANCE.md).

usage: test_cpu_threads.py TESSERA"""
import json
import math
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from checks import check, finish  # noqa: E402 (the tests' shared module)

TESSERA = sys.argv[1]
BUSY = "--busy-neighbour" in sys.argv[2:]
MODEL = str(pathlib.Path(__file__).resolve().parents[2] / "models" / "kjv-tiny")
PLAN = "0-3@cpu"
PROMPT = ",".join(str(i) for i in range(1, 17))


def cores_available():
    """The cores this process may use: its affinity, bounded by a cgroup v2 quota."""
    cores = len(os.sched_getaffinity(0))
    try:
        quota, period = pathlib.Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return cores


def environment(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "MPI_LOCALNRANKS")}
    env.update(extra)
    return env


def generate(*extra, env=None, new_tokens=100):
    r = subprocess.run([TESSERA, "generate", "--model", MODEL, "--plan", PLAN, "--tokens", PROMPT,
                        "--max-new-tokens", str(new_tokens), "--json", *extra],
                       capture_output=True, text=True, env=env or environment(), timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"tessera generate {' '.join(extra)} exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


cores = cores_available()


def contract():
    # What the backend chooses by itself, and says.
    j = generate(new_tokens=4)
    t = j["cpu_threads"]
    check("chosen: as many threads as the cores available", t["threads"] == cores, f"{t} with {cores} cores")
    check("chosen: small products on one thread (a threshold is set)", t["split_macs"] > 0, t)
    check("chosen: the report says why", t["source"].startswith(f"chosen: {cores} core"), t["source"])

    # --cpu-threads and OPENBLAS_NUM_THREADS set every product's threads.
    t = generate("--cpu-threads", "3", new_tokens=4)["cpu_threads"]
    check("--cpu-threads 3: three threads for every product",
          t["threads"] == 3 and t["split_macs"] == 0 and t["source"] == "--cpu-threads 3", t)
    t = generate(env=environment(OPENBLAS_NUM_THREADS="1"), new_tokens=4)["cpu_threads"]
    check("OPENBLAS_NUM_THREADS=1 is taken as given", t["threads"] == 1 and t["source"] == "OPENBLAS_NUM_THREADS=1", t)
    t = generate("--cpu-threads", "2", env=environment(OPENBLAS_NUM_THREADS="1"), new_tokens=4)["cpu_threads"]
    check("--cpu-threads wins over OPENBLAS_NUM_THREADS", t["threads"] == 2, t)
    r = subprocess.run([TESSERA, "generate", "--model", MODEL, "--plan", PLAN, "--tokens", "1", "--cpu-threads", "0"],
                       capture_output=True, text=True, timeout=60)
    check("--cpu-threads 0 is bad usage (exit 2)", r.returncode == 2 and "--cpu-threads" in r.stderr,
          f"exit {r.returncode}: {r.stderr}")

    # Two MPI ranks on the host, unbound (as MPICH tells a rank): they share the cores.
    t = generate(env=environment(MPI_LOCALNRANKS="2"), new_tokens=4)["cpu_threads"]
    check("two unbound ranks on the host: each takes half the cores",
          t["threads"] == max(1, cores // 2) and "shared by 2 MPI ranks" in t["source"], t)

    # A plan without a cpu device reports none.
    r = subprocess.run([TESSERA, "run", "--model", MODEL, "--plan", "0-3@model:0", "--seq", "4", "--json"],
                       capture_output=True, text=True, timeout=120)
    check("a plan without the cpu device has cpu_threads null",
          r.returncode == 0 and json.loads(r.stdout)["cpu_threads"] is None, r.stderr)


# Decode beside a busy process: per-token p90 within 3x the median (timing is checked as a ratio
# within one run, never against a clock). The split-over-every-core run beside it is printed, not
# checked: whether it falls off the cliff depends on the scheduler.
def busy_neighbour():
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        chosen = generate(new_tokens=120)["decode"]
        single = generate("--cpu-threads", "1", new_tokens=120)["decode"]
        split = generate("--cpu-threads", str(max(2, cores)), new_tokens=120)["decode"]
    finally:
        busy.kill()
        busy.wait()
    for name, d in (("chosen", chosen), ("one thread", single), (f"--cpu-threads {max(2, cores)}", split)):
        lat = d["latency_ms"]
        print(f"  beside a busy process, {name}: {d['tokens_per_s']:.0f} tokens/s, per token median "
              f"{lat['median']:.3f} ms, p90 {lat['p90']:.3f} ms ({lat['p90'] / lat['median']:.2f}x)")
    lat = chosen["latency_ms"]
    check("beside a busy process, the chosen threads' per-token p90 is within 3x the median",
          lat["p90"] <= 3 * lat["median"], lat)
    check("beside a busy process, the chosen threads decode within 3x of one thread's per-token median",
          lat["median"] <= 3 * single["latency_ms"]["median"], (lat, single["latency_ms"]))


if BUSY:
    busy_neighbour()
else:
    contract()
finish()
