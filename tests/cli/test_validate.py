#!/usr/bin/env python3
"""`tessera validate` end to end on one device: the JSON contract, the verdict and exit code, and,
for a device with an injected fault, that the failing check names it.

usage: test_validate.py TESSERA_BINARY DEVICE LEVEL EXPECT
  EXPECT is `pass`, or `fail:TEXT[|TEXT...]`: the verdict is fail and the first failed check's
  detail contains every TEXT.
"""
import json
import subprocess
import sys

tessera, device, level, expect = sys.argv[1:5]
cmd = [tessera, "validate", "--device", device, "--level", level, "--json"]
print("$", " ".join(cmd), flush=True)
r = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
print(r.stdout)
print(r.stderr, file=sys.stderr)
problems = []
try:
    j = json.loads(r.stdout)
except json.JSONDecodeError as e:
    sys.exit(f"FAIL: no JSON on stdout ({e})")
for key in ("schema_version", "device", "level", "result", "tests"):
    if key not in j:
        problems.append(f"JSON lacks '{key}'")
for t in j.get("tests", []):
    if set(t) != {"name", "result", "detail", "seconds"} or t["result"] not in ("pass", "fail", "skip", "incomplete"):
        problems.append(f"malformed test entry {t}")
if expect == "pass":
    if j.get("result") != "pass" or r.returncode != 0:
        problems.append(f"verdict {j.get('result')} exit {r.returncode}, expected pass and exit 0")
else:
    texts = expect.split(":", 1)[1].split("|")
    failed = [t for t in j.get("tests", []) if t["result"] == "fail"]
    if j.get("result") != "fail" or r.returncode != 1:
        problems.append(f"verdict {j.get('result')} exit {r.returncode}, expected fail and exit 1")
    if not failed:
        problems.append("no check failed")
    else:
        missing = [x for x in texts if x not in failed[0]["detail"]]
        if missing:
            problems.append(f"first failed check '{failed[0]['name']}' does not name {missing}")
for p in problems:
    print("FAIL:", p)
print("ok" if not problems else f"{len(problems)} problem(s)")
sys.exit(1 if problems else 0)
