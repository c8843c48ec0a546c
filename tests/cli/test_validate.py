#!/usr/bin/env python3
"""`tessera validate` end to end on one device: the JSON contract, the verdict and exit code, and,
for a device with an injected fault, that the failing check names it.

usage: test_validate.py TESSERA_BINARY DEVICE LEVEL EXPECT
  EXPECT is `pass`, or `fail:TEXT[|TEXT...]`: the verdict is fail and the first failed check's
  detail contains every TEXT.
"""
import json
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from checks import check, finish  # noqa: E402 (the tests' shared module)

tessera, device, level, expect = sys.argv[1:5]
cmd = [tessera, "validate", "--device", device, "--level", level, "--json"]
print("$", " ".join(cmd), flush=True)
r = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
print(r.stdout)
print(r.stderr, file=sys.stderr)
try:
    j = json.loads(r.stdout)
except json.JSONDecodeError as e:
    check("JSON on stdout", False, str(e))
    finish()
check("the JSON has every key", all(k in j for k in ("schema_version", "device", "level", "result", "tests")),
      str(list(j)))
for t in j.get("tests", []):
    check(f"test entry {t.get('name')} is well formed",
          set(t) == {"name", "result", "detail", "seconds"} and t["result"] in ("pass", "fail", "skip", "incomplete"),
          str(t))
results = [t.get("result") for t in j.get("tests", [])]
if expect == "pass":
    check("verdict pass, exit 0", j.get("result") == "pass" and r.returncode == 0,
          f"verdict {j.get('result')} exit {r.returncode}")
    # A pass has checked something: a report of no checks, or of skips only, is no pass.
    check("a pass is made of passed checks: at least one, and none failed or incomplete",
          "pass" in results and not {"fail", "incomplete"} & set(results), results)
else:
    texts = expect.split(":", 1)[1].split("|")
    failed = [t for t in j.get("tests", []) if t["result"] == "fail"]
    check("verdict fail, exit 1", j.get("result") == "fail" and r.returncode == 1,
          f"verdict {j.get('result')} exit {r.returncode}")
    check(f"the first failed check names {texts}", bool(failed) and all(x in failed[0]["detail"] for x in texts),
          str(failed[:1]))
finish()
