"""What the regression runs: the coverage build, the jobs of each kind, and running them."""
import dataclasses
import pathlib
import re
import shlex
import subprocess
import sys
import time

from . import results
from .presets import PRESETS, has_bf16, trace_uses_bf16, twin

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
# Performance workloads: (name, m, n, k, extra gemm flags). Cheap enough for the small preset. Those
# in BF16 run on the presets with BF16 only.
WORKLOADS = [
    ("gemm_64x64x64", 64, 64, 64, []),
    ("gemm_96x256x128_int8", 96, 256, 128, ["--out", "int8", "--bias"]),
    ("gemm_attention_128x128x64", 128, 128, 64, []),
    ("gemm_mlp_32x512x128_acc", 32, 512, 128, ["--accumulate"]),
    ("gemm_96x256x128_bf16", 96, 256, 128, ["--precision", "bf16", "--bias"]),
]
KINDS = ["lint", "equiv", "synth", "directed", "random", "replay", "perf", "coverage"]
SIMULATIONS = ("directed", "random", "replay", "perf")


@dataclasses.dataclass
class Job:
    name: str                 # the test's name in the testplan and the JUnit file
    kind: str
    preset: str | None
    cmd: list                 # as a person would type it (the reproduce line)
    env: dict = dataclasses.field(default_factory=dict)
    seed: int | None = None
    timeout: int = 900
    catch2_xml: pathlib.Path | None = None  # where a Catch2 test writes its XML report
    status: str = "not run"   # pass | fail
    seconds: float = 0.0
    output: str = ""
    detail: str = ""          # why it failed: the first wrong write, the mismatch, the error
    metrics: dict = dataclasses.field(default_factory=dict)
    repro: str = ""
    waveform: str = ""

    @property
    def id(self):
        return f"{self.kind}/{self.preset or '-'}/{self.name}" + (f"/seed={self.seed}" if self.seed is not None else "")

    def argv(self):
        """The command run: a Catch2 test also writes its XML report."""
        return self.cmd + (["-r", "xml", "-o", str(self.catch2_xml)] if self.catch2_xml else [])


def command_line(env, cmd):
    return " ".join([f"{k}={shlex.quote(str(v))}" for k, v in env.items()] + [shlex.quote(str(c)) for c in cmd])


def run_job(job, base_env):
    t0 = time.monotonic()
    try:
        r = subprocess.run(job.argv(), env={**base_env, **job.env}, capture_output=True, text=True,
                           timeout=job.timeout, cwd=ROOT)
        job.output = r.stdout + r.stderr
        job.status = "pass" if r.returncode == 0 else "fail"
    except subprocess.TimeoutExpired as e:
        job.output = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        job.status = "fail"
        job.detail = f"no result within {job.timeout} s"
    job.seconds = time.monotonic() - t0
    catch2 = None
    if job.catch2_xml:
        try:
            catch2 = job.catch2_xml.read_text(errors="replace")
        except OSError:
            catch2 = ""
    results.parse(job, catch2)
    return job


def build(args):
    """Configures and builds the coverage build the simulations run on."""
    presets = ";".join(args.presets)
    cfg = ["cmake", "-S", str(ROOT), "-B", str(args.build), "-G", "Ninja", "-DTESSERA_RTL_COVERAGE=ON",
           f"-DTESSERA_RTL_PRESETS={presets}", "-DTESSERA_WITH_CUDA=OFF"]
    print(f"regress: building {args.build} (coverage, presets {', '.join(args.presets)})", flush=True)
    targets = ["tessera-sim"] + ([] if args.host else ["tessera", "tessera_cosim_tests"])
    for cmd in (cfg, ["cmake", "--build", str(args.build), "-j", str(args.jobs), "--target", *targets]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"regress: build failed:\n{(r.stdout + r.stderr)[-3000:]}")


def cosim_tests(args, spec):
    exe = args.host_build / "tests/tessera_cosim_tests"
    r = subprocess.run([str(exe), "--list-test-names-only", spec], capture_output=True, text=True)
    return [line.strip() for line in r.stdout.splitlines() if line.strip()]


def file_name(text):
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def make_jobs(args):
    jobs = []
    tessera = str(args.host_build / "host/tessera")
    cosim = str(args.host_build / "tests/tessera_cosim_tests")
    raw = args.out / "coverage/raw"
    xml = args.out / "catch2"
    sim_env = {"TESSERA_COVERAGE_DIR": str(raw)}
    if args.sim or args.host:  # another build's tessera would find its own simulator, not this coverage one
        sim_env["TESSERA_SIM"] = str(args.sim or args.build / "sim/platform/tessera-sim")
    if "lint" not in args.skip:
        for p in args.presets:
            jobs.append(Job("lint", "lint", p, [str(ROOT / "scripts/lint"), "--preset", p], timeout=300))
    if "equiv" not in args.skip:
        for i, p in enumerate(args.presets):  # the wrong readout's refusal needs checking once
            jobs.append(Job("equiv", "equiv", p, [sys.executable, str(ROOT / "scripts/equiv"), "--preset", p]
                            + (["--mutant"] if i == 0 else []), timeout=2400))
    if "synth" not in args.skip:
        for p in args.synth_presets:
            out = args.out / f"synth_{p}.json"
            jobs.append(Job("synth", "synth", p, [sys.executable, str(ROOT / "scripts/synth"), "--preset", p,
                                                  "--fmax", "--json", str(out)], env={"SYNTH_JSON": str(out)}, timeout=7200))
    # The cosim tests of the BF16 precision run on the presets that have it, those of an int8-only
    # engine on the presets without it.
    simulated = {"directed", "random"} - args.skip
    bf16_tests = set(cosim_tests(args, "[bf16]")) if simulated else set()
    int8_only_tests = set(cosim_tests(args, "[int8-only]")) if simulated else set()

    def fits(name, preset):
        return name not in (int8_only_tests if has_bf16(preset) else bf16_tests)

    if "directed" not in args.skip:
        for name in cosim_tests(args, "~[random]"):
            for p in (q for q in args.presets if fits(name, q)):
                jobs.append(Job(name, "directed", p, [cosim, name], env={**sim_env, "TESSERA_PRESET": p},
                                catch2_xml=xml / f"{file_name(name)}_{p}.xml"))
    if "random" not in args.skip:
        # Every randomized test with every seed: one named for a preset ("... on the small preset")
        # on that preset, or on its twin where only the twin is in the run (the quick regression's
        # small-bf16 runs small's); the others on each preset.
        for name in cosim_tests(args, "[random]"):
            named = [p for p in PRESETS if name.endswith(f" on the {p} preset")]
            if named and named[0] not in args.presets and twin(named[0]) in args.presets:
                named = [twin(named[0])]
            for p in (named if named else args.presets):
                if p not in args.presets or not fits(name, p):
                    continue
                env = {**sim_env, "TESSERA_PRESET": p}
                for seed in args.seed_list:
                    jobs.append(Job(name, "random", p, [cosim, name], env={**env, "TESSERA_SEED": str(seed)},
                                    seed=seed, catch2_xml=xml / f"{file_name(name)}_{p}_{seed}.xml"))
    if "replay" not in args.skip:
        for trace in sorted(p.parent for p in (ROOT / "tests/traces").glob("*/trace.json")):
            for p in (q for q in args.presets if has_bf16(q) or not trace_uses_bf16(trace)):
                jobs.append(Job(f"replay: {trace.name}", "replay", p,
                                [tessera, "replay", str(trace), "--device", f"rtl?preset={p}", "--json"], env=sim_env))
    if "perf" not in args.skip:
        for name, m, n, k, flags in WORKLOADS:
            for p in (q for q in args.presets if has_bf16(q) or "bf16" not in flags):
                jobs.append(Job(f"perf: {name}", "perf", p,
                                [tessera, "gemm", "--device", f"rtl?preset={p}", "--m", str(m), "--n", str(n),
                                 "--k", str(k), *flags, "--json"], env=sim_env))
    return jobs


def rerun_with_waveform(job, args, base_env, waves=True):
    """Reruns a failed simulation with the same seed and an FST waveform (unless not waves); sets the
    repro command."""
    if job.kind not in SIMULATIONS:
        job.repro = command_line({}, job.cmd)
        return
    env = {k: v for k, v in job.env.items() if k != "TESSERA_COVERAGE_DIR"}
    if job.seed is not None:
        env["TESSERA_SEED"] = str(job.seed)
    if not waves:
        job.repro = command_line(env, job.cmd)
        return
    fst = args.out / "waves" / (file_name(job.id) + ".fst")
    fst.parent.mkdir(parents=True, exist_ok=True)
    env["TESSERA_TRACE"] = str(fst)
    job.repro = command_line(env, job.cmd)
    try:
        subprocess.run(job.cmd, env={**base_env, **env}, capture_output=True, text=True, timeout=job.timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pass
    if fst.exists():
        job.waveform = str(fst)
