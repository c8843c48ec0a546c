#!/usr/bin/env python3
"""Configures and builds a sanitizer build of Tessera in a directory of its own (docs/TESTING.md).

usage: subbuild.py --source DIR --build DIR --cxx COMPILER [--generator G] [--jobs N]
                   --target T [--target T ...] [-- CMAKE_ARGS...]

Run by the ctest entries sanitize_*_build of the main build; prints how long each step took.
"""
import argparse
import os
import subprocess
import sys
import time


def step(what, cmd):
    print("+ " + " ".join(cmd), flush=True)
    t0 = time.monotonic()
    r = subprocess.run(cmd)
    print(f"{what}: {time.monotonic() - t0:.1f} s (exit {r.returncode})", flush=True)
    if r.returncode != 0:
        sys.exit(r.returncode)


def main():
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--cxx", required=True)
    ap.add_argument("--cmake", default="cmake")
    ap.add_argument("--generator", default="Ninja")
    ap.add_argument("--jobs", default=os.environ.get("TESSERA_JOBS", "2"))
    ap.add_argument("--target", action="append", required=True)
    a = ap.parse_args(argv)
    step("configure", [a.cmake, "-S", a.source, "-B", a.build, "-G", a.generator,
                       f"-DCMAKE_CXX_COMPILER={a.cxx}", "-DTESSERA_SANITIZER_TESTS=OFF", *extra])
    step("build", [a.cmake, "--build", a.build, "-j", str(a.jobs), "--target", *a.target])


if __name__ == "__main__":
    main()
