#!/usr/bin/env python3
"""Multi-process runs (mpirun -np N tessera run): the same logits as one process, traffic as the
plan predicts, and failures that stop every rank with one message.

usage: test_mpi.py MPIEXEC TESSERA WITH_RTL [--gpu | --nccl]

Bit-identical: pipeline stages on different ranks, and tensor-parallel stages over two ranks (the
all-reduce adds two partial sums, and addition commutes). Over three or more ranks MPI chooses the
order of the additions, so those runs are held to a relative L2 of 1e-6 instead.

Host BLAS (the cpu device, a projected fp32 GPU) is bit-identical only at the same OpenBLAS thread
count. OpenBLAS sizes its pool from the CPUs a process may run on, and mpirun binds each of two
ranks to one core while it leaves oversubscribed ranks unbound; sgemm splits its work by thread,
and on some CPUs (AMD EPYC's kernels, for one) a column summed at a split's edge is summed in
another order. So such runs are compared twice: bit for bit with OPENBLAS_NUM_THREADS=1 on both
sides, and within a relative L2 of 1e-6 with the thread count as it comes.

--gpu: ranks on real GPUs instead (exit 77, skipped, where there is none): a GPU rank next to a
model rank over MPI. --nccl: GPU ranks that talk GPU to GPU through NCCL (skipped, with the reason,
where there are fewer than two GPUs or the build has no NCCL)."""
import json
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from checks import check, finish, no_gpu_exit, rel_l2, skip  # noqa: E402 (the tests' shared module)

MPIEXEC, TESSERA, WITH_RTL = sys.argv[1], sys.argv[2], sys.argv[3].upper() in ("1", "ON", "TRUE")
GPU = "--gpu" in sys.argv[4:]


def mpirun(n, *args, env=None, command="run"):
    forward = [a for name in (env or {}) for a in ("-x", name)]  # local ranks get these too
    return subprocess.run([MPIEXEC, "--allow-run-as-root", "--oversubscribe", *forward, "-np", str(n), TESSERA, command,
                           *args], capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})


def single(*args, env=None, command="run"):
    return subprocess.run([TESSERA, command, *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


def logits(path):
    data = pathlib.Path(path).read_bytes()
    header = struct.unpack("<H", data[8:10])[0]
    body = data[10 + header:]
    return struct.unpack(f"<{len(body) // 4}f", body)


BLAS_THREADS = "host BLAS"  # `identical` for runs with host BLAS: see the module's text


def same_as_single(name, n, multi_plan, single_plan, identical, extra=()):
    if identical == BLAS_THREADS:
        compare_runs(f"{name}, one OpenBLAS thread", n, multi_plan, single_plan, True, extra,
                     env={"OPENBLAS_NUM_THREADS": "1"})
        identical = False
    return compare_runs(name, n, multi_plan, single_plan, identical, extra)


def compare_runs(name, n, multi_plan, single_plan, identical, extra=(), env=None):
    with tempfile.TemporaryDirectory() as d:
        r = mpirun(n, "--plan", multi_plan, "--batch", "4", "--microbatches", "2", "--dump", f"{d}/m", "--json", *extra,
                   env=env)
        s = single("--plan", single_plan, "--batch", "4", "--microbatches", "2", "--dump", f"{d}/s", *extra, env=env)
        if r.returncode or s.returncode:
            check(name, False, r.stdout[-500:] + r.stderr + s.stderr)
            return {}
        a, b = logits(f"{d}/m/logits.npy"), logits(f"{d}/s/logits.npy")
        err = rel_l2(a, b)
        ok = (a == b and len(a) > 0) if identical else err < 1e-6
        check(f"{name}: {'bit-identical to' if identical else f'relative L2 {err:.2g} from'} one process", ok,
              f"relative L2 {err}")
        return json.loads(r.stdout)


def traffic_as_predicted(name, j, gpu_to_gpu):
    """Each of the two ranks sent something, all of it as the plan predicts; `gpu_to_gpu(rank)` says how
    much of it went GPU to GPU."""
    ranks = j.get("mpi", {}).get("ranks", [])
    check(name, len(ranks) == 2 and all(r["bytes_sent"] == r["predicted_bytes_sent"] > 0
                                        and r["gpu_bytes_sent"] == gpu_to_gpu(r) for r in ranks), json.dumps(ranks))


def cpu_checks():
    j = same_as_single("2 ranks, two pipeline stages", 2, "0@r0:model:0;1@r1:model:1", "0@model:0;1@model:1", True)
    traffic_as_predicted("2 ranks: measured traffic is what the plan predicts (activations once per microbatch, "
                         "the logits once), none of it GPU to GPU", j, lambda r: 0)
    j = same_as_single("2 ranks, one stage sharded over both", 2, "0-1@r0:model:0+r1:model:1", "0-1@model:0+model:1", True)
    traffic_as_predicted("2 ranks, tensor parallel: two all-reduces per layer and microbatch, as predicted", j,
                         lambda r: 0)
    check("2 ranks, tensor parallel: the all-reduces are in the report", any(o["op"] == "allreduce" for o in j.get("ops", [])))
    same_as_single("3 ranks, cpu then a stage over two model devices", 3, "0@r0:cpu;1@r1:model:1+r2:model:2",
                   "0@cpu;1@model:1+model:2", BLAS_THREADS)
    j = same_as_single("3 ranks, one stage sharded three ways", 3, "0-1@r0:model:0+r1:model:1+r2:model:2",
                       "0-1@model:0+model:1+model:2", False)
    ranks = j.get("mpi", {}).get("ranks", [])
    check("3 ranks: measured traffic within 0.1% of the prediction",
          len(ranks) == 3 and all(abs(r["bytes_sent"] - r["predicted_bytes_sent"]) <= 1e-3 * r["predicted_bytes_sent"]
                                  for r in ranks), json.dumps(ranks))
    if WITH_RTL:
        same_as_single("2 ranks, an RTL simulator each", 2, "0@r0:rtl?preset=small;1@r1:rtl?preset=small",
                       "0@rtl:0?preset=small;1@rtl:1?preset=small", True)

    # Generation: every rank decodes with its KV caches; rank 0 samples and shares each token.
    gen = ("--model", "random:2,64,4,300,64", "--tokens", "5,6,7,8", "--max-new-tokens", "12", "--temperature", "0.8",
           "--seed", "3", "--json")
    r = mpirun(2, "--plan", "0@r0:model:0+r1:model:1;1@r1:model:2", *gen, command="generate")
    s1 = single("--plan", "0@model:0+model:1;1@model:2", *gen, command="generate")
    j, k = (json.loads(x.stdout) if x.returncode == 0 else {} for x in (r, s1))
    check("generate on 2 ranks (a stage sharded over both, then one): the ids of one process",
          j.get("generated_ids") and j.get("generated_ids") == k.get("generated_ids")
          and {o["device"] for o in j.get("ops", [])} >= {"r0:model:0", "r1:model:1", "r1:model:2"},
          r.stderr + s1.stderr + str(j.get("generated_ids")) + str(k.get("generated_ids")))

    r = mpirun(2, "--plan", "0@model:0;1@model:1", "--json")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    check("without rank prefixes the devices go round-robin over the ranks",
          [x["devices"] for x in j.get("mpi", {}).get("ranks", [])] == [["r0:model:0"], ["r1:model:1"]], r.stderr)

    t0 = time.monotonic()
    r = mpirun(3, "--plan", "0@r0:model;1@r1:model?fault=stuck:1,1,20;2@r2:cpu", "--model", "random:3,64,4,100,32")
    took = time.monotonic() - t0
    check("a faulty device on rank 1 stops every rank with one message naming the rank, device and check",
          r.returncode != 0 and r.stderr.count("failed its quick health check") == 1 and "r1:model" in r.stderr
          and "faulty PE at row 1, column 1" in r.stderr and took < 60, f"{took:.1f} s\n{r.stderr}")
    # A device error mid-run (a bus error on an address the run reads or writes, depending on where
    # the allocator puts the operands; not the health check): that rank says so and aborts the job,
    # while rank 0 waits for its logits.
    t0 = time.monotonic()
    r = mpirun(2, "--plan", "0@r0:model;1@r1:model?fault=slverr:0x40000")
    took = time.monotonic() - t0
    check("a device failing mid-run on rank 1 ends every rank at once with one message naming the rank and error",
          r.returncode != 0 and r.stderr.count("tessera run: rank 1 of 2:") == 1
          and ("axi_rd" in r.stderr or "axi_wr" in r.stderr)
          and took < 30, f"{took:.1f} s\n{r.stderr}")  # (mpirun's own MPI_ABORT banner is not always printed)
    # A rank that dies mid-run: mpirun ends the job and names the rank; nobody waits forever.
    job = subprocess.Popen([MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np", "2", TESSERA, "run", "--model",
                            "random:12,768,12,50257,1024", "--plan", "0-5@r0:model;6-11@r1:model", "--batch", "8",
                            "--seq", "32", "--microbatches", "8"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim = None
    for _ in range(100):  # find rank 1 once it has started
        time.sleep(0.1)
        for pid in subprocess.run(["pgrep", "-f", "tessera run --model random:12"], capture_output=True,
                                  text=True).stdout.split():
            try:
                if b"OMPI_COMM_WORLD_RANK=1\0" in pathlib.Path(f"/proc/{pid}/environ").read_bytes():
                    victim = int(pid)
            except OSError:
                pass
        if victim:
            break
    time.sleep(2)
    t0 = time.monotonic()
    if victim:
        subprocess.run(["kill", "-9", str(victim)])
    try:
        out, err = job.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        job.kill()
        out, err = job.communicate()
    check("a rank killed mid-run ends the whole job within seconds, the rank named",
          victim is not None and job.returncode != 0 and "rank 1" in err and time.monotonic() - t0 < 30,
          f"victim {victim}, rc {job.returncode}, {time.monotonic() - t0:.1f} s\n{err}")

    r = mpirun(2, "--plan", "0@r0:model;1@r2:model")
    check("a plan naming a rank the run does not have is bad input (exit 2)",
          r.returncode == 2 and "is on rank 2, but the run has 2 processes" in r.stderr, r.stderr)
    r = single("--plan", "0@r0:model;1@r1:model")
    check("ranks in a single-process run: exit 2, saying to use mpirun", r.returncode == 2 and "mpirun" in r.stderr,
          r.stderr)
    r = mpirun(2, "--plan", "0@r0:model;1@model")
    check("ranks on some devices only: exit 2", r.returncode == 2 and "every device names its rank" in r.stderr, r.stderr)
    j = same_as_single("2 ranks, a projected GPU then a model device", 2, "0@r0:cuda:0?projected=1;1@r1:model",
                       "0@cuda:0?projected=1;1@model", BLAS_THREADS)
    traffic_as_predicted("a projected GPU sends nothing GPU to GPU", j, lambda r: 0)


def measured_on_gpu(name, j):
    """Every op of a cuda device was measured on a GPU: a run that fell back to a projection fails."""
    gpu = [o for o in j.get("ops", []) if "cuda:" in o["device"]]
    check(f"{name}: every GPU op measured, none projected", gpu and all(o["time"] == "measured" for o in gpu),
          json.dumps(sorted({(o["device"], o["time"]) for o in gpu})) + json.dumps(j.get("projected", {})))


def gpu_count():
    smi = shutil.which("nvidia-smi")
    gpus = subprocess.run([smi, "-L"], capture_output=True, text=True).stdout.count("GPU ") if smi else 0
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:  # what CUDA lets this process see
        gpus = min(gpus, len([d for d in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]))
    return gpus


def gpu_checks():
    if gpu_count() == 0:
        no_gpu_exit("no NVIDIA GPU here (nvidia-smi lists none)")
    for precision in ("fp32", "int8"):
        j = same_as_single(f"2 ranks, a GPU ({precision}) then a model device, over MPI", 2,
                           f"0@r0:cuda:0?precision={precision};1@r1:model", f"0@cuda:0?precision={precision};1@model",
                           True)
        traffic_as_predicted(f"{precision}: a GPU rank next to a model rank sends over MPI", j, lambda r: 0)
        measured_on_gpu(precision, j)


def nccl_checks():
    """GPU ranks that talk GPU to GPU: a ctest entry of its own, so that where they cannot run (fewer
    than two GPUs, a build without NCCL) the suite counts a skip with its reason."""
    gpus = gpu_count()
    if gpus < 2:
        skip(f"the NCCL checks need two GPUs (NCCL gives each rank its own); this machine has {gpus}")
    r = mpirun(2, "--plan", "0@r0:model:0;1@r1:model:1", "--json")
    library = (json.loads(r.stdout) if r.returncode == 0 else {}).get("mpi", {}).get("library", "")
    check("2 ranks on model devices run, naming their transport library", bool(library), r.stderr[-1000:])
    if library and "NCCL" not in library:
        skip(f"this build has no NCCL (GPU ranks talk over MPI: {library})")
    for precision in ("fp32", "int8"):
        dev = f"?precision={precision}"
        j = same_as_single(f"2 ranks, a stage sharded over two GPUs ({precision}), all-reduce through NCCL", 2,
                           f"0-1@r0:cuda:0{dev}+r1:cuda:1{dev}", f"0-1@cuda:0{dev}+cuda:1{dev}", True)
        traffic_as_predicted(f"{precision}: tensor-parallel GPU ranks send all of it GPU to GPU", j,
                             lambda r: r["bytes_sent"])
        measured_on_gpu(f"{precision}, tensor parallel", j)
        j = same_as_single(f"2 ranks, a pipeline stage per GPU ({precision}), activations through NCCL", 2,
                           f"0@r0:cuda:0{dev};1@r1:cuda:1{dev}", f"0@cuda:0{dev};1@cuda:1{dev}", True)
        # Rank 0 sends the activations GPU to GPU; rank 1 sends the logits to rank 0 over MPI.
        traffic_as_predicted(f"{precision}: pipelined GPU ranks send the activations GPU to GPU", j,
                             lambda r: r["bytes_sent"] if r["rank"] == 0 else 0)
        measured_on_gpu(f"{precision}, pipelined", j)


nccl_checks() if "--nccl" in sys.argv[4:] else gpu_checks() if GPU else cpu_checks()
finish()
