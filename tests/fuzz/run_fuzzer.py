#!/usr/bin/env python3
"""Runs one fuzz harness the way ctest does (docs/TESTING.md).

usage: run_fuzzer.py HARNESS --name NAME [--libfuzzer --runs N --work DIR] [--max-len N] [--dict FILE]

Every mode first runs the harness once on each file of tests/fuzz/regressions/NAME (inputs that
once crashed it) and of tests/fuzz/corpus/NAME (the seeds). With --libfuzzer (a clang build with
-DTESSERA_FUZZ=ON) it then fuzzes for N runs from the seeds, with a seed taken from TESSERA_SEED or
picked at random and printed. New inputs and any crash go under --work, never into the source tree;
a crash prints the command that reproduces it.
"""
import argparse
import os
import pathlib
import random
import shutil
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent


def files(d):
    return sorted(p for p in d.iterdir() if p.is_file()) if d.is_dir() else []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("harness")
    ap.add_argument("--name", required=True, help="the harness's name: its corpus and regressions folders")
    ap.add_argument("--libfuzzer", action="store_true", help="the harness is linked with libFuzzer: fuzz it")
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--work", type=pathlib.Path, help="where new inputs and crashes go (libFuzzer)")
    ap.add_argument("--max-len", type=int, default=4096)
    ap.add_argument("--dict", type=pathlib.Path)
    ap.add_argument("--timeout", type=int, default=20, help="seconds one input may take before it is a hang")
    ap.add_argument("--malloc-limit-mb", type=int, default=256, help="a bigger single allocation is a finding")
    ap.add_argument("--max-total-time", type=int, default=120, help="stop fuzzing after this many seconds")
    a = ap.parse_args()

    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0:strict_string_checks=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    corpus = HERE / "corpus" / a.name
    regressions = HERE / "regressions" / a.name
    seeds, crashes = files(corpus), files(regressions)
    if not seeds:
        print(f"FAIL no seed corpus in {corpus}")
        return 1

    # The inputs kept in the tree, each run once: they must all pass in every build.
    replay = crashes + seeds
    cmd = [a.harness] + (["-timeout=%d" % a.timeout, "-malloc_limit_mb=%d" % a.malloc_limit_mb] if a.libfuzzer else [])
    r = subprocess.run(cmd + [str(p) for p in replay], env=env)
    if r.returncode != 0:
        print(f"FAIL {a.name}: an input kept in the tree crashes the harness (exit {r.returncode}); "
              f"rerun: {' '.join(cmd)} FILE")
        return 1
    print(f"ok   {a.name}: {len(crashes)} regression inputs and {len(seeds)} seeds pass")
    if not a.libfuzzer:
        return 0

    seed = int(os.environ.get("TESSERA_SEED") or random.randrange(1, 2**31))
    work = a.work or pathlib.Path.cwd() / f"fuzz-{a.name}"
    new_corpus, artifacts = work / "corpus", work / "artifacts"
    shutil.rmtree(new_corpus, ignore_errors=True)  # start from the seeds every time: a bounded run
    new_corpus.mkdir(parents=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    fuzz = cmd + [f"-runs={a.runs}", f"-seed={seed}", f"-max_len={a.max_len}", f"-max_total_time={a.max_total_time}",
                  "-rss_limit_mb=2048", f"-artifact_prefix={artifacts}/", "-print_final_stats=1"]
    if a.dict:
        fuzz.append(f"-dict={a.dict}")
    fuzz += [str(new_corpus), str(corpus)]
    print(f"fuzzing {a.name}: {a.runs} runs, seed {seed} (TESSERA_SEED={seed} reruns this)")
    print(" ".join(fuzz), flush=True)
    before = set(files(artifacts))
    t0 = time.monotonic()
    r = subprocess.run(fuzz, env=env)
    found = [p for p in files(artifacts) if p not in before]
    if r.returncode != 0 or found:
        print(f"FAIL {a.name}: the fuzzer found a crash (exit {r.returncode}) after {time.monotonic() - t0:.0f} s")
        for p in found:
            print(f"  input: {p}\n  reproduce: {a.harness} {p}\n"
                  f"  keep it: copy it to {regressions}/ and fix the parser")
        return 1
    print(f"ok   {a.name}: {a.runs} runs in {time.monotonic() - t0:.1f} s, no crash")
    return 0


if __name__ == "__main__":
    sys.exit(main())
