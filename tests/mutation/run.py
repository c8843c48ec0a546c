#!/usr/bin/env python3
"""Proof that the regression catches bugs: applies each mutation in mutations.toml to a scratch
copy of rtl/, builds a simulator from it, and runs `scripts/regress --quick` with that simulator.
Each mutant must fail the regression, and its report must name the first wrong write (the
scoreboard's address, expected and actual bytes and output element, or a replay's), the RTL
assertion (rtl/sva) that failed, or the action counters that disagree with the golden model.

  tests/mutation/run.py --build BUILD --work DIR [--only NAME]

BUILD is a build with tessera and the cosim tests (scripts/build's or scripts/regress's): they
drive the mutant simulator. Lint, synthesis and coverage are left out of the mutants' regressions:
they are not what catches a functional bug, and each would cost minutes per mutant; so would
rerunning each failure with a waveform (--no-waves). A mutant's regression stops at its first
failure that names a wrong write, an assertion or the counters: that is the catch, and the jobs left
would only take time.
"""
import argparse
import pathlib
import shutil
import subprocess
import sys
import time
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from regression.mutation import NAMED_FAILURE, PROGRESS_FAIL, configure, regression  # noqa: E402


def named_cause(line, previous):
    """The catch: the line under a failing job's FAIL line, where it names the first wrong write,
    the assertion or the counters."""
    return NAMED_FAILURE.search(line) if PROGRESS_FAIL.match(previous) else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", type=pathlib.Path, required=True, help="a build with tessera and the cosim tests")
    ap.add_argument("--work", type=pathlib.Path, required=True, help="scratch directory")
    ap.add_argument("--only", help="run this mutation only")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    if not all((args.build / exe).exists() for exe in ("host/tessera", "tests/tessera_cosim_tests")):
        sys.exit(f"mutation: {args.build} has no host/tessera and tests/tessera_cosim_tests (run scripts/build)")
    mutations = tomllib.loads((pathlib.Path(__file__).parent / "mutations.toml").read_text())["mutation"]
    if args.only:
        mutations = [m for m in mutations if m["name"] == args.only]
        if not mutations:
            sys.exit(f"mutation: no mutation named {args.only}")
    args.work.mkdir(parents=True, exist_ok=True)
    rtl, build = args.work / "rtl", args.work / "build"
    results = []
    for mut in mutations:
        t0 = time.monotonic()
        shutil.rmtree(rtl, ignore_errors=True)
        shutil.copytree(ROOT / "rtl", rtl)
        path = rtl / mut["file"]
        text = path.read_text()
        if text.count(mut["find"]) != 1:
            print(f"FAIL {mut['name']}: its text is in {mut['file']} {text.count(mut['find'])} times, not once "
                  f"(update mutations.toml with the RTL)")
            results.append(False)
            continue
        path.write_text(text.replace(mut["find"], mut["replace"]))
        log = []
        r = subprocess.run(["cmake", "--build", str(build), "-j", str(args.jobs), "--target", "tessera-sim"],
                           capture_output=True, text=True) if configure(rtl, build, log) else None
        if r is None or r.returncode != 0:
            out = "".join(log) if r is None else r.stdout + r.stderr
            sys.exit(f"mutation {mut['name']}: building the mutant failed:\n{out[-3000:]}")
        report = args.work / f"report_{mut['name']}"
        caught, named, out = regression(
            [str(ROOT / "scripts/regress"), "--quick", "--no-build", "--host", str(args.build), "--build", str(build),
             "--sim", str(build / "sim/platform/tessera-sim"), "--skip", "lint,equiv,synth,coverage", "--no-waves",
             "--seeds", "2", "--jobs", str(args.jobs), "--report", str(report), "--junit", str(report / "junit.xml")],
            named_cause)
        named = named or NAMED_FAILURE.search(out)
        ok = caught and named is not None
        print(f"{'ok  ' if ok else 'FAIL'} {mut['name']} ({mut['description']}): regression "
              f"{'failed' if caught else 'PASSED'} in {time.monotonic() - t0:.0f} s"
              + (f"\n     named: {named.group(0)[:300]}" if named else "\n     no wrong write, assertion or counter named")
              + ("" if ok else f"\n{out[-5000:]}"), flush=True)
        results.append(ok)
    print(f"{sum(results)} of {len(results)} mutations caught")
    return 0 if results and all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
