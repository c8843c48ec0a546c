#!/usr/bin/env python3
"""Replays every checked-in trace (tests/traces) on a device: each must match every output byte.

usage: test_replay.py TESSERA DEVICE
Cycle deltas against the recording are printed, not judged: scripts/regress holds them to the
baselines."""
import json
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from checks import check, finish  # noqa: E402 (the tests' shared module)

tessera, device = sys.argv[1], sys.argv[2]
traces = sorted(p.parent for p in (pathlib.Path(__file__).parent.parent / "traces").glob("*/trace.json"))
check("the checked-in traces are there", bool(traces))
for t in traces:
    r = subprocess.run([tessera, "replay", str(t), "--device", device, "--json"], capture_output=True, text=True,
                       timeout=600)
    j = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
    cycles = j.get("cycles", {})
    check(f"{t.name} on {device}: {j.get('bytes_checked')} bytes checked, cycles recorded {cycles.get('recorded')} "
          f"replayed {cycles.get('replayed')}",
          r.returncode == 0 and j.get("result") == "pass" and j.get("bytes_checked", 0) > 0,
          f"{j.get('first_mismatch', '')}{r.stderr.strip()}")
finish()
