"""scripts/mutate: the regression's mutation score over a seeded sample of single-point RTL mutants.

Each mutant is built into a simulator of the quick regression's preset (small-bf16: the small engine
with both precisions) in a worker's own tree (a copy of rtl/ and a build directory, reused from one
mutant to the next: Verilator rewrites its C++ and ccache, where installed, compiles only the files
whose text changed), then `scripts/regress --quick` runs
with that simulator (the equivalence check, synthesis and coverage left out, as for the
hand-written mutants of tests/mutation). The first failing job kills the mutant and stops its run;
the regression's lint job (Verilator -Wall) runs last, on the mutants that are left.
"""
import argparse
import concurrent.futures
import dataclasses
import hashlib
import json
import os
import pathlib
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib

from . import mutants as mutgen
from .jobs import ROOT
from .presets import QUICK_PRESET

EQUIVALENT = ROOT / "tests/mutation/equivalent.toml"
PROGRESS_FAIL = re.compile(r"^\[\d+/\d+\] FAIL (.+?)(?: \([\d.]+ s\))?$")
# The scoreboard's first wrong AXI write, a replay's first wrong byte with its output element, the
# RTL assertion that failed, or the device's action counters next to the golden model's.
NAMED_FAILURE = re.compile(r"write to 0x[0-9a-f]+: expected 0x[0-9a-f]+, got 0x[0-9a-f]+.*|"
                           r"unexpected write of 0x[0-9a-f]+ to 0x[0-9a-f]+.*|"
                           r"byte 0x[0-9a-f]+ is 0x[0-9a-f]+, expected 0x[0-9a-f]+; it belongs to C\[.*|"
                           r"RTL assertion \S+ failed.*|"
                           r"counted actions .*; golden model .*")


def regression(cmd, stop, timeout=None):
    """Runs the regression; `stop(line, previous_line)` says when a line of its output is the catch
    (its jobs are then killed). Returns (caught, the catching line's match or None, output)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL)) if timeout else None
    if timer:
        timer.start()
    lines, previous = [], ""
    try:
        for line in proc.stdout:
            lines.append(line)
            caught = stop(line, previous)
            if caught:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return True, caught, "".join(lines)
            previous = line
        proc.wait()
    finally:
        proc.stdout.close()
        if timer:
            timer.cancel()
    out = "".join(lines)
    if proc.returncode == -signal.SIGKILL:
        return None, None, out  # out of time
    return proc.returncode == 1 and "regression: FAIL" in out, None, out


def regress_command(host, build, report, seeds, seed_base, jobs=1):
    return [str(ROOT / "scripts/regress"), "--quick", "--no-build", "--host", str(host), "--build", str(build),
            "--sim", str(build / "sim/platform/tessera-sim"), "--skip", "lint,equiv,synth,coverage", "--no-waves",
            "--seeds", str(seeds), "--seed-base", str(seed_base), "--jobs", str(jobs), "--report", str(report)]


def configure(rtl, build, jobs_log):
    """A build of the quick preset's simulator from `rtl`; ccache compiles it where installed."""
    cmd = ["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja", f"-DTESSERA_RTL_DIR={rtl}",
           f"-DTESSERA_RTL_PRESETS={QUICK_PRESET}", "-DTESSERA_WITH_CUDA=OFF"]
    if shutil.which("ccache"):
        cmd.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
    r = subprocess.run(cmd, capture_output=True, text=True)
    jobs_log.append(r.stdout + r.stderr)
    return r.returncode == 0


def build_simulator(build, timeout):
    try:
        r = subprocess.run(["cmake", "--build", str(build), "-j", "1", "--target", "tessera-sim"],
                           capture_output=True, text=True, timeout=timeout)
        return r.returncode == 0, r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        return False, f"the build took more than {timeout} s"


def build_verdict(output):
    """A failed build: `lint` where only Verilator's -Wall warnings stopped it (the regression's lint
    job would fail the same way), else `invalid` (not legal SystemVerilog, or not buildable)."""
    errors = [line for line in output.splitlines() if line.startswith("%Error") and "Exiting due to" not in line]
    if "%Warning-" in output and not errors:
        warning = next(line for line in output.splitlines() if line.startswith("%Warning-"))
        return "lint", warning
    return "invalid", (errors[0] if errors else output.strip().splitlines()[-1] if output.strip() else "")


@dataclasses.dataclass
class Result:
    key: str
    module: str
    file: str
    line: int
    operator: str
    before: str
    after: str
    outcome: str = ""       # one of OUTCOMES
    by: str = ""            # the job that failed, or the lint warning
    detail: str = ""        # its first line of cause
    seconds: float = 0.0    # in all
    build_seconds: float = 0.0
    reason: str = ""        # an equivalent mutant: why


def load_equivalent(path=EQUIVALENT):
    if not path.exists():
        return {}
    return {e["key"]: e for e in tomllib.loads(path.read_text()).get("equivalent", [])}


def equivalent_reason(entry):
    reason = entry.get("reason", "")
    return f"on the {entry['scope']} preset: {reason}" if entry.get("scope") else reason


def sample(all_mutants, n, seed, modules=None, operators=None):
    pool = [m for m in all_mutants if (not modules or m.module in modules) and (not operators or m.operator in operators)]
    pool.sort(key=lambda m: (m.file, m.start, m.operator, m.replacement))
    return random.Random(seed).sample(pool, min(n, len(pool)))


class Worker:
    """A copy of rtl/ and a build directory, one mutant at a time."""

    def __init__(self, root, index):
        self.dir = root / f"worker{index}"
        self.rtl, self.build = self.dir / "rtl", self.dir / "build"
        self.configured = False
        self.pristine = None  # the fingerprint of the unmutated RTL's Verilated model

    def model_fingerprint(self):
        """A hash of the quick preset's Verilated C++: a mutant whose model is the unmutated one's
        changed code that preset does not elaborate."""
        h = hashlib.sha1()
        for f in sorted((self.build / f"sim/platform/verilated_{QUICK_PRESET.replace('-', '_')}").glob("*.[ch]*")):
            h.update(f.name.encode())
            h.update(f.read_bytes())
        return h.hexdigest()

    def prepare(self, mutant=None, log=None):
        """rtl/ as it is, with `mutant` applied."""
        if self.rtl.exists():
            shutil.rmtree(self.rtl)
        # Fresh times on every file: a file put back as it was must still be newer than the model
        # built from the last mutant, or the build would keep that model.
        shutil.copytree(ROOT / "rtl", self.rtl, copy_function=shutil.copy)
        if mutant:
            path = self.rtl / mutant.file
            path.write_text(mutant.apply(path.read_text()))
        if not self.configured:
            self.configured = configure(self.rtl, self.build, log if log is not None else [])
        return self.configured


def run_one(worker, m, args, text):
    before, after = m.lines(text)
    res = Result(m.key, m.module, m.file, m.line, m.operator, before.strip(), after.strip())
    t0 = time.monotonic()
    log = []
    if worker.pristine is None:
        if not (worker.prepare(None, log) and build_simulator(worker.build, args.build_timeout)[0]):
            res.outcome, res.detail = "invalid", "the unmutated RTL does not build: " + "".join(log)[-300:]
            return res
        worker.pristine = worker.model_fingerprint()
    if not worker.prepare(m, log):
        res.outcome, res.detail = "invalid", "cmake: " + "".join(log)[-300:]
        return res
    ok, out = build_simulator(worker.build, args.build_timeout)
    res.build_seconds = time.monotonic() - t0
    if not ok:
        res.outcome, res.detail = build_verdict(out)
        res.by = "build (Verilator -Wall)" if res.outcome == "lint" else "build"
        res.seconds = time.monotonic() - t0
        return res
    if worker.model_fingerprint() == worker.pristine:
        res.outcome = "unreached"
        res.detail = f"the {QUICK_PRESET} preset's Verilated model is the unmutated one's: the code is not elaborated there"
        res.seconds = time.monotonic() - t0
        return res
    seed_base = int(hashlib.sha1(f"{args.seed}:{m.key}".encode()).hexdigest()[:7], 16)
    failed = {}

    def stop(line, previous):
        # The first failing job is the catch; its cause is the line after its FAIL line.
        if "job" in failed:
            failed["detail"] = line.strip()
            return True
        f = PROGRESS_FAIL.match(line)
        if f:
            failed["job"] = f.group(1)
        return False

    caught, _, out = regression(regress_command(args.host, worker.build, worker.dir / "report", args.seeds, seed_base),
                                stop, args.timeout)
    res.seconds = time.monotonic() - t0
    if caught is None:
        res.outcome, res.detail = "timeout", f"no verdict within {args.timeout} s"
    elif caught:
        res.outcome, res.by, res.detail = "killed", failed.get("job", "regression"), failed.get("detail", "")
        named = NAMED_FAILURE.search(res.detail)
        res.detail = named.group(0) if named else res.detail
    else:
        # The regression's lint and synthesis jobs, left out above for time, for the mutants that got
        # this far: Verilator -Wall, then Yosys (a latch, a failed check, multipliers off the DSPs).
        env = {**os.environ, "TESSERA_RTL_DIR": str(worker.rtl)}
        lint = subprocess.run([str(ROOT / "scripts/lint"), "--preset", QUICK_PRESET], capture_output=True, text=True,
                              env=env)
        synth = None
        if lint.returncode == 0:
            synth = subprocess.run([sys.executable, str(ROOT / "scripts/synth"), "--preset", QUICK_PRESET],
                                   capture_output=True, text=True, env=env)
        res.seconds = time.monotonic() - t0
        if lint.returncode != 0:
            res.outcome, res.by = "lint", "lint (scripts/lint)"
            res.detail = next((line for line in lint.stderr.splitlines() if line.startswith("%")), lint.stderr[-200:])
        elif synth.returncode != 0:
            res.outcome, res.by = "synth", "synthesis (scripts/synth)"
            lines = (synth.stdout + synth.stderr).splitlines()
            res.detail = next((line for line in lines if "no driver" in line or "ERROR" in line), "\n".join(lines[-3:]))
        else:
            res.outcome = "survived"
            res.detail = f"regression seeds {seed_base}..{seed_base + args.seeds - 1}, the lint and synthesis passed"
    return res


OUTCOMES = ("killed", "lint", "synth", "timeout", "survived", "unreached", "equivalent", "invalid")


def score(results):
    """Killed (by a test, by lint or synthesis, or by a hang) over those and the survivors:
    equivalent, invalid and unreached mutants (code the quick preset does not elaborate) are left
    out; per module and in all."""
    per = {}
    for r in results:
        for k in (r.module, "all"):
            s = per.setdefault(k, dict.fromkeys(OUTCOMES, 0))
            s[r.outcome] += 1
    for s in per.values():
        caught = s["killed"] + s["lint"] + s["synth"] + s["timeout"]
        s["score"] = caught / (caught + s["survived"]) if caught + s["survived"] else None
    return per


def report_markdown(args, results, per, seconds):
    lines = [f"# Mutation score: {len(results)} mutants, seed {args.seed}", "",
             f"`scripts/mutate run --sample {args.sample} --seed {args.seed}`: {seconds / 60:.1f} min on "
             f"{args.jobs} workers. Killed by a failing test, by the lint (Verilator -Wall refused the mutant, "
             f"as the regression's lint job would), by synthesis (Yosys refused it, as the regression's synthesis "
             f"job would) or by a hang; equivalent mutants (tests/mutation/equivalent.toml), "
             f"unreached ones (code the quick preset does not elaborate, so the quick regression's simulator is "
             f"the unmutated one) and invalid ones (not legal SystemVerilog) are not counted.", "",
             "| module | mutants | " + " | ".join(OUTCOMES) + " | score |", "|---" * (len(OUTCOMES) + 3) + "|"]
    for module in sorted(per, key=lambda k: (k == "all", k)):
        s = per[module]
        total = sum(s[k] for k in OUTCOMES)
        value = "-" if s["score"] is None else f"{s['score']:.3f}"
        lines.append(f"| {module} | {total} | " + " | ".join(str(s[k]) for k in OUTCOMES) + f" | {value} |")
    survivors = [r for r in results if r.outcome == "survived"]
    lines += ["", f"## Survivors ({len(survivors)})", ""]
    for r in survivors:
        lines += [f"- `{r.key}` {r.module} ({r.file}:{r.line}, {r.operator}): {r.detail}", "",
                  "  ```diff", f"  - {r.before}", f"  + {r.after}", "  ```", ""]
    lines += ["## Every mutant", "", "| key | module | line | operator | outcome | by | detail | s |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        detail = (r.reason or r.detail).replace("|", "\\|")[:160]
        lines.append(f"| `{r.key}` | {r.module} | {r.file}:{r.line} | {r.operator} | {r.outcome} | {r.by} | {detail} | "
                     f"{r.seconds:.0f} |")
    return "\n".join(lines) + "\n"


def parse_args(doc, argv):
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("list", help="every mutant: key, module, line, operator, the line before and after")
    run = sub.add_parser("run", help="the regression against a seeded sample of mutants")
    for p in (ls, run):
        p.add_argument("--module", action="append", help="only this module's mutants (repeatable)")
        p.add_argument("--operator", action="append", choices=sorted(mutgen.OPERATORS),
                       help="only mutants of this operator (repeatable)")
    ls.add_argument("--summary", action="store_true", help="counts per module and operator only")
    run.add_argument("--sample", type=int, default=100, help="how many mutants (default 100)")
    run.add_argument("--seed", type=int, help="the sample's seed (default: drawn and printed)")
    run.add_argument("--key", action="append", help="run this mutant (a key from `list`; repeatable) instead of a sample")
    run.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="mutants built and run at once")
    run.add_argument("--host", type=pathlib.Path, default=ROOT / "build",
                     help="a build with tessera and the cosim tests (scripts/build's): they drive each mutant")
    run.add_argument("--work", type=pathlib.Path, default=ROOT / "build-mutate", help="the workers' trees")
    run.add_argument("--report", type=pathlib.Path, help="report directory (default WORK/report)")
    run.add_argument("--seeds", type=int, default=2, help="random-GEMM seeds per mutant's regression (default 2)")
    run.add_argument("--timeout", type=int,
                     help="seconds a mutant's regression may take (default: 5 times the unmutated RTL's, at least "
                          "300; 1800 with --no-check)")
    run.add_argument("--build-timeout", type=int, default=900, help="seconds a mutant's build may take")
    run.add_argument("--no-check", action="store_true", help="skip the regression of the unmutated RTL first")
    args = ap.parse_args(argv)
    if args.command == "run":
        if args.sample < 1:
            ap.error("--sample must be at least 1")
        if not all((args.host / exe).exists() for exe in ("host/tessera", "tests/tessera_cosim_tests")):
            ap.error(f"--host {args.host}: no host/tessera and tests/tessera_cosim_tests there (run scripts/build)")
        if args.seed is None:
            args.seed = random.SystemRandom().randrange(1 << 31)
        args.report = args.report or args.work / "report"
    return args


def main(doc, argv=None):
    args = parse_args(doc, argv)
    rtl = ROOT / "rtl"
    everything = mutgen.all_mutants(rtl)
    modules = set(args.module or [])
    known = {m.module for m in everything}
    if modules - known:
        print(f"mutate: no module {', '.join(sorted(modules - known))}; the modules: {', '.join(sorted(known))}",
              file=sys.stderr)
        return 2
    texts = {name: (rtl / name).read_text() for name in mutgen.rtl_files(rtl)}
    if args.command == "list":
        chosen = [m for m in everything if (not modules or m.module in modules) and
                  (not args.operator or m.operator in args.operator)]
        if args.summary:
            counts = {}
            for m in chosen:
                counts.setdefault(m.module, {}).setdefault(m.operator, 0)
                counts[m.module][m.operator] += 1
            for module, ops in sorted(counts.items()):
                print(f"{module:16} {sum(ops.values()):5}  " + "  ".join(f"{k} {v}" for k, v in sorted(ops.items())))
            print(f"{'all':16} {len(chosen):5}")
            return 0
        for m in chosen:
            before, after = m.lines(texts[m.file])
            print(f"{m.key} {m.module} {m.file}:{m.line} {m.operator}\n  - {before.strip()}\n  + {after.strip()}")
        return 0

    if args.key:
        by_key = {m.key: m for m in everything}
        unknown = [k for k in args.key if k not in by_key]
        if unknown:
            print(f"mutate: no mutant {', '.join(unknown)} in the RTL as it is (scripts/mutate list)", file=sys.stderr)
            return 2
        chosen = [by_key[k] for k in args.key]
    else:
        chosen = sample(everything, args.sample, args.seed, modules, set(args.operator or []))
    equivalent = load_equivalent()
    print(f"mutate: {len(chosen)} of {len(everything)} mutants (seed {args.seed}), {args.jobs} at a time; "
          f"trees in {args.work}", flush=True)
    args.work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    workers = [Worker(args.work, i) for i in range(max(1, min(args.jobs, len(chosen))))]
    if not args.no_check:
        # The unmutated RTL must pass, or every mutant would look killed.
        w = workers[0]
        log = []
        ok = w.prepare(None, log) and build_simulator(w.build, args.build_timeout)[0]
        if ok:
            w.pristine = w.model_fingerprint()
        t1 = time.monotonic()
        caught, _, out = regression(regress_command(args.host, w.build, w.dir / "report", args.seeds, args.seed),
                                    lambda line, previous: PROGRESS_FAIL.match(line), args.timeout or 1800) \
            if ok else (True, None, "".join(log))
        # A mutant that hangs the engine with its bus busy escapes the driver's idle watchdog: it is
        # caught by this, in minutes rather than the jobs' own 15.
        args.timeout = args.timeout or max(300, round(5 * (time.monotonic() - t1)))
        if caught is not False:
            print(f"mutate: the unmutated RTL does not pass the regression; no score without it:\n{out[-3000:]}",
                  file=sys.stderr)
            return 1
        print(f"mutate: the unmutated RTL passes ({time.monotonic() - t0:.0f} s); a mutant's regression may take "
              f"{args.timeout} s", flush=True)
    args.timeout = args.timeout or 1800

    results, free = [], list(workers)
    lock = threading.Lock()

    def task(m):
        with lock:
            w = free.pop()
        try:
            if m.key in equivalent:
                before, after = m.lines(texts[m.file])
                return Result(m.key, m.module, m.file, m.line, m.operator, before.strip(), after.strip(),
                              outcome="equivalent", reason=equivalent_reason(equivalent[m.key]))
            return run_one(w, m, args, texts[m.file])
        finally:
            with lock:
                free.append(w)

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(workers)) as pool:
        for n, future in enumerate(concurrent.futures.as_completed([pool.submit(task, m) for m in chosen]), 1):
            r = future.result()
            results.append(r)
            print(f"[{n}/{len(chosen)}] {r.outcome.upper():10} {r.key} {r.module}:{r.line} {r.operator} "
                  f"({r.seconds:.0f} s, build {r.build_seconds:.0f} s){': ' + r.by if r.by else ''}\n      - {r.before}\n      + {r.after}"
                  + (f"\n      {r.detail[:200]}" if r.detail else ""), flush=True)
    order = {m.key: i for i, m in enumerate(chosen)}
    results.sort(key=lambda r: order[r.key])
    per = score(results)
    seconds = time.monotonic() - t0
    args.report.mkdir(parents=True, exist_ok=True)
    (args.report / "mutation.md").write_text(report_markdown(args, results, per, seconds))
    (args.report / "mutation.json").write_text(json.dumps(
        {"seed": args.seed, "sample": len(chosen), "mutants": len(everything), "seconds": seconds, "score": per,
         "results": [dataclasses.asdict(r) for r in results]}, indent=1))
    print("\n" + f"{'module':16}" + "".join(f" {k:>10}" for k in OUTCOMES) + "  score")
    for module in sorted(per, key=lambda k: (k == "all", k)):
        s = per[module]
        value = "-" if s["score"] is None else f"{s['score']:.3f}"
        print(f"{module:16}" + "".join(f" {s[k]:10}" for k in OUTCOMES) + f"  {value}")
    print(f"mutate: seed {args.seed}, {seconds / 60:.1f} min; report {args.report / 'mutation.md'}")
    return 0
