#!/usr/bin/env python3
"""The timing model against the RTL: for a handful of cheap GEMMs per preset (odd shapes, K > N,
K < R, the int8 epilogue with bias and ACCUMULATE, BF16 with both outputs on the presets with BF16,
slow and narrow memory)
and a few random ones,
the `model` device's cycles must be within 2% of the `rtl` device's busy counter, and its bytes
read and written equal. A correctness check of the model, not a speed goal (scripts/bench-model
prints the speed).

usage: model_vs_rtl.py TESSERA [--rtl-cli EXE] [--preset P]...
  TESSERA     tessera executable for both devices (or only the model one, with --rtl-cli)
The random GEMMs come from TESSERA_SEED if set, else a fresh seed; it is printed.
Prints one line per GEMM and 'N passed, N failed' at the end; exit status 1 on a failure.
"""
import argparse
import json
import os
import random
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
from regression.presets import PRESETS, has_bf16  # noqa: E402

TOLERANCE = 0.02
CASES = ["1x1x1", "17x33x5", "1x64x64", "64x1x64", "64x64x64", "64x16x512", "64x64x8", "100x70x130",
         "64x128x128+int8+bias+acc", "64x96x96+int8+relu+bias", "64x64x64@mem_latency=120",
         "64x128x128@mem_bytes_per_cycle=8", "64x128x128@mem_max_reads=4&mem_max_writes=4",
         "48x100x200", "40x40x700", "1x64x64+fold", "2x100x130+fold", "1x33x3+fold", "2x16x40+fold",
         "17x33x5+bf16", "64x64x64+bf16", "1x64x200+bf16", "64x128x128+bf16+bf16out+bias+acc",
         "40x40x700+bf16+relu", "64x128x128+bf16@mem_bytes_per_cycle=8", "70x40x3+bf16+bias+acc"]
RANDOM_PER_PRESET = 3


def random_case(rng, bf16):
    """A small GEMM with random flags (BF16 where the preset has it), and now and then another memory
    system."""
    case = f"{rng.randint(1, 96)}x{rng.randint(1, 96)}x{rng.randint(1, 300)}"
    if rng.random() < 0.3 and bf16:
        case += "+bf16" + ("+bf16out" if rng.random() < 0.5 else "") + ("+relu" if rng.random() < 0.5 else "")
    elif rng.random() < 0.5:
        case += "+int8" + ("+relu" if rng.random() < 0.5 else "")
    case += "+bias" if rng.random() < 0.5 else ""
    case += "+acc" if rng.random() < 0.5 else ""
    mem = rng.choice(["", "mem_latency=120", "mem_latency=20", "mem_bytes_per_cycle=8",
                      "mem_max_reads=3&mem_max_writes=5"])
    return case + (f"@{mem}" if mem else "")


def gemm(cli, device, case):
    shape, _, opts = case.partition("@")
    dims, *flags = shape.split("+")
    m, n, k = dims.split("x")
    args = {"int8": ["--out", "int8"], "bias": ["--bias"], "relu": ["--relu"], "acc": ["--accumulate"], "fold": ["--fold"],
            "bf16": ["--precision", "bf16"], "bf16out": ["--out", "bf16"]}
    cmd = [cli, "gemm", "--device", device + (f"&{opts}" if opts else ""), "--m", m, "--n", n, "--k", k, "--json"]
    for f in flags:
        cmd += args[f]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[1:])}: exit {r.returncode}: {r.stderr.strip() or r.stdout.strip()}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("tessera")
    ap.add_argument("--rtl-cli", help="tessera executable for the rtl device (default: TESSERA)")
    ap.add_argument("--preset", action="append", choices=PRESETS)
    args = ap.parse_args()
    seed = int(os.environ.get("TESSERA_SEED", "0"), 0) or random.randrange(1, 2**32)
    print(f"seed: {seed} (rerun with TESSERA_SEED={seed})", flush=True)
    rng = random.Random(seed)
    passed = failed = 0
    for preset in args.preset or PRESETS:
        bf16 = has_bf16(preset)
        cases = [c for c in CASES if bf16 or "+bf16" not in c]
        for case in cases + [random_case(rng, bf16) for _ in range(RANDOM_PER_PRESET)]:
            name = f"{preset} {case}"
            try:
                rtl = gemm(args.rtl_cli or args.tessera, f"rtl?preset={preset}", case)
                model = gemm(args.tessera, f"model?preset={preset}", case)
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
                failed += 1
                print(f"FAIL {name}: {e}")
                continue
            err = model["cycles"] / rtl["cycles"] - 1
            bytes_same = all(model[k] == rtl[k] for k in ("read_bytes", "write_bytes"))
            ok = abs(err) <= TOLERANCE and bytes_same
            passed += ok
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name}: rtl {rtl['cycles']} cycles, model {model['cycles']} "
                  f"({err:+.2%}); bytes read {rtl['read_bytes']}/{model['read_bytes']}, "
                  f"written {rtl['write_bytes']}/{model['write_bytes']}", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
