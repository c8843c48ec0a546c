"""scripts/regress: the command line, and a run from build to report."""
import argparse
import concurrent.futures
import os
import pathlib
import random
import shutil
import time

from . import baselines, coverage, jobs, report
from .jobs import KINDS, ROOT
from .presets import PRESETS, QUICK_PRESET

# What --full synthesizes: the small and default engines, each int8-only and with BF16 (large's
# synthesis takes hours).
FULL_SYNTH = ["small", "default", "small-bf16", "default-bf16"]


def parse_args(doc, argv=None):
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help=f"the {QUICK_PRESET} preset, 4 seeds (default)")
    mode.add_argument("--full", action="store_true", help="every preset, 20 seeds, synthesis of the small and default engines")
    seeds = ap.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", type=int, help="random-GEMM seeds per preset")
    seeds.add_argument("--seed", type=int, help="run the random GEMMs with this seed only (reproduces a failure)")
    ap.add_argument("--seed-base", type=int, help="with --seeds N: the seeds B, B+1, ... B+N-1 instead of drawn ones")
    ap.add_argument("--presets", help="comma-separated presets (overrides the mode's)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--build", type=pathlib.Path, default=ROOT / "build-regress")
    ap.add_argument("--no-build", action="store_true", help="use --build as it is")
    ap.add_argument("--host", type=pathlib.Path,
                    help="take tessera and the cosim tests from this build (scripts/build's) and build only the "
                         "coverage simulator in --build, instead of compiling the host a second time")
    ap.add_argument("--sim", type=pathlib.Path, help="simulator to run instead of the build's (an RTL variant)")
    ap.add_argument("--no-waves", action="store_true",
                    help="do not rerun failed simulations with a waveform (their reproduce lines still print)")
    ap.add_argument("--skip", default="", help=f"kinds to leave out: {','.join(KINDS)}")
    ap.add_argument("--junit", type=pathlib.Path, help="write JUnit XML here")
    ap.add_argument("--report", type=pathlib.Path, help="report directory (default BUILD/regress-report)")
    ap.add_argument("--cycle-tolerance", type=float, default=2.0, help="allowed cycle growth in percent")
    ap.add_argument("--area-tolerance", type=float, default=2.0, help="allowed resource growth in percent")
    ap.add_argument("--fmax-tolerance", type=float, default=2.0, help="allowed fall of the estimated Fmax in percent")
    ap.add_argument("--update-baselines", action="store_true",
                    help="write this run's cycles, area and estimated Fmax as baselines")
    args = ap.parse_args(argv)

    args.mode = "full" if args.full else "quick"
    args.skip = {s for s in args.skip.split(",") if s}
    if args.skip - set(KINDS):
        ap.error(f"unknown kinds to skip: {', '.join(sorted(args.skip - set(KINDS)))}")
    args.presets = args.presets.split(",") if args.presets else (PRESETS if args.full else [QUICK_PRESET])
    if set(args.presets) - set(PRESETS):
        ap.error(f"unknown preset in {args.presets}")
    args.synth_presets = [p for p in (FULL_SYNTH if args.full else [QUICK_PRESET]) if p in args.presets] \
        or args.presets[:1]
    if args.seed is not None:
        args.seed_list = [args.seed]
    else:
        n = args.seeds if args.seeds is not None else (20 if args.full else 4)
        base = args.seed_base if args.seed_base is not None else random.SystemRandom().randrange(1 << 31)
        args.seed_list = [base + i for i in range(n)]
    args.out = args.report or (args.build / "regress-report")
    args.cycles_baseline = ROOT / "tests/baselines/cycles.json"
    args.area_baseline = ROOT / "tests/baselines/area.json"
    args.fmax_baseline = ROOT / "rtl/fmax.json"
    if args.sim and not args.sim.exists():
        ap.error(f"--sim {args.sim}: no such file")
    args.host_build = args.host or args.build
    missing = [exe for exe in ("host/tessera", "tests/tessera_cosim_tests") if args.host and not (args.host / exe).exists()]
    if missing:
        ap.error(f"--host {args.host}: no {' or '.join(missing)} there (build it with scripts/build)")
    return args


def main(doc, argv=None):
    args = parse_args(doc, argv)
    t0 = time.monotonic()
    if not args.no_build:
        jobs.build(args)
    for d in ("coverage", "waves", "catch2"):
        shutil.rmtree(args.out / d, ignore_errors=True)
    for d in ("coverage/raw", "catch2"):
        (args.out / d).mkdir(parents=True, exist_ok=True)
    todo = jobs.make_jobs(args)
    print(f"regress: {args.mode}, {len(todo)} jobs on {args.jobs} cores; presets {', '.join(args.presets)}; "
          f"random seeds {', '.join(map(str, args.seed_list)) or '-'}", flush=True)
    base_env = {**os.environ, "SYSTEMC_DISABLE_COPYRIGHT_MESSAGE": "1"}
    base_env.pop("TESSERA_TRACE", None)
    done = 0
    # Synthesis first: it is the longest job, and the simulations fill the other cores around it.
    order = sorted(todo, key=lambda j: j.kind != "synth")
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for future in concurrent.futures.as_completed([pool.submit(jobs.run_job, j, base_env) for j in order]):
            j = future.result()
            done += 1
            print(f"[{done}/{len(todo)}] {j.status.upper():4} {j.id} ({j.seconds:.1f} s)"
                  + (f"\n      {j.detail[:300]}" if j.status != "pass" else ""), flush=True)
    failed = [j for j in todo if j.status != "pass"]
    for j in failed:
        jobs.rerun_with_waveform(j, args, base_env, waves=not args.no_waves)

    cov = None if "coverage" in args.skip else coverage.merge(args.out / "coverage/raw", args.out / "coverage")
    cycles_base, area_base = baselines.load(args.cycles_baseline), baselines.load(args.area_baseline)
    fmax_base = baselines.load(args.fmax_baseline)
    deltas, deltas_ok = baselines.compare(todo, cycles_base, area_base, args.cycle_tolerance, args.area_tolerance,
                                          fmax_base, args.fmax_tolerance)
    plan = coverage.testplan((ROOT / "rtl/testplan.toml").read_text(), todo, cov)
    if args.update_baselines:
        cycles, area = baselines.updated(todo, cycles_base, area_base)
        baselines.write(args.cycles_baseline, cycles)
        baselines.write(args.area_baseline, area)
        baselines.write(args.fmax_baseline, baselines.updated_fmax(todo, fmax_base))
        print(f"regress: baselines written to {args.cycles_baseline.relative_to(ROOT)}, "
              f"{args.area_baseline.relative_to(ROOT)} and {args.fmax_baseline.relative_to(ROOT)}")
        deltas_ok = True
    verdict = "PASS" if not failed and deltas_ok else "FAIL"

    md = report.markdown(args, todo, deltas, deltas_ok, cov, plan, verdict)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.md").write_text(md)
    (args.out / "report.html").write_text(report.markdown_to_html(md))
    if args.junit:
        report.write_junit(args.junit, todo)
    print(report.summary(args, todo, time.monotonic() - t0, deltas, cov, plan, verdict, args.junit))
    return 0 if verdict == "PASS" else 1
