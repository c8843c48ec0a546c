#!/usr/bin/env python3
"""Replays every checked-in trace (tests/traces) on a device: each must match every output byte.

usage: test_replay.py TESSERA DEVICE
Cycle deltas against the recording are printed, not judged: scripts/regress holds them to the
baselines."""
import json
import pathlib
import subprocess
import sys

tessera, device = sys.argv[1], sys.argv[2]
traces = sorted(p.parent for p in (pathlib.Path(__file__).parent.parent / "traces").glob("*/trace.json"))
failures = 0
if not traces:
    print("FAIL no traces found")
    sys.exit(1)
for t in traces:
    r = subprocess.run([tessera, "replay", str(t), "--device", device, "--json"], capture_output=True, text=True,
                       timeout=600)
    j = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
    ok = r.returncode == 0 and j.get("result") == "pass" and j.get("bytes_checked", 0) > 0
    cycles = j.get("cycles", {})
    print(f"{'ok  ' if ok else 'FAIL'} {t.name} on {device}: {j.get('bytes_checked')} bytes checked, cycles recorded "
          f"{cycles.get('recorded')} replayed {cycles.get('replayed')}"
          + ("" if ok else f"\n     {j.get('first_mismatch', '')}{r.stderr.strip()}"))
    failures += not ok
print(f"{failures} of {len(traces)} traces failed")
sys.exit(1 if failures else 0)
