#!/usr/bin/env python3
"""Replays every checked-in trace (tests/traces) on a device: each must match every output byte. On
an int8-only preset, a trace with BF16 GEMMs must be refused (exit 2, naming BF16) instead.

usage: test_replay.py TESSERA DEVICE
Cycle deltas against the recording are printed, not judged: scripts/regress holds them to the
baselines."""
import json
import pathlib
import subprocess
import sys
import urllib.parse

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
from checks import check, finish  # noqa: E402 (the tests' shared module)
from regression.presets import has_bf16, trace_uses_bf16  # noqa: E402

tessera, device = sys.argv[1], sys.argv[2]
options = dict(urllib.parse.parse_qsl(device.partition("?")[2]))
preset = options.get("preset", "default-bf16" if options.get("precision") == "bf16" else "default")
traces = sorted(p.parent for p in (pathlib.Path(__file__).parent.parent / "traces").glob("*/trace.json"))
check("the checked-in traces are there", bool(traces))
for t in traces:
    r = subprocess.run([tessera, "replay", str(t), "--device", device, "--json"], capture_output=True, text=True,
                       timeout=600)
    if trace_uses_bf16(t) and not has_bf16(preset):
        check(f"{t.name} (BF16) on {device}, an int8-only preset: refused", r.returncode == 2 and "has no BF16" in
              r.stderr and not r.stdout.strip(), f"exit {r.returncode}: {r.stdout.strip()[-300:]}{r.stderr.strip()}")
        continue
    j = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
    cycles = j.get("cycles", {})
    check(f"{t.name} on {device}: {j.get('bytes_checked')} bytes checked, cycles recorded {cycles.get('recorded')} "
          f"replayed {cycles.get('replayed')}",
          r.returncode == 0 and j.get("result") == "pass" and j.get("bytes_checked", 0) > 0,
          f"{j.get('first_mismatch', '')}{r.stderr.strip()}")
finish()
