#!/usr/bin/env python3
"""The test tiers (docs/TESTING.md, cmake/TesseraTiers.cmake) as ctest sees this build: every entry
in exactly one tier, and none of the full tier's kinds in the default one (a sub-build, the hardware
regression, the large preset's RTL, an entry that takes both cores), so that scripts/test stays a
newcomer's check.

usage: tiers.py CTEST BUILD_DIR"""
import json
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from checks import check, every, finish  # noqa: E402 (the tests' shared module)

CTEST, BUILD = sys.argv[1], sys.argv[2]
TIERS = {"default", "full"}
FULL_ONLY_LABELS = {"sanitize", "regress", "gpu-build", "fuzz", "tsan"}

r = subprocess.run([CTEST, "--test-dir", BUILD, "--show-only=json-v1"], capture_output=True, text=True, timeout=60)
check("ctest lists the entries", r.returncode == 0, r.stderr)
tests = json.loads(r.stdout).get("tests", []) if r.returncode == 0 else []


def prop(t, name, default=None):
    return next((p["value"] for p in t.get("properties", []) if p["name"] == name), default)


labels = {t["name"]: set(prop(t, "LABELS", [])) for t in tests}
untiered = [n for n, ls in labels.items() if len(ls & TIERS) != 1]
check(f"every one of the {len(tests)} entries is in exactly one tier", tests and not untiered, untiered)
default = [t for t in tests if "default" in labels[t["name"]]]
print(f"     default tier: {len(default)} entries; full tier adds {len(tests) - len(default)}")
# The presets whose RTL only the full tier builds (cmake/TesseraTiers.cmake).
FULL_PRESETS = ("large", "large-bf16", "default-bf16")
heavy = [t["name"] for t in default
         if labels[t["name"]] & FULL_ONLY_LABELS or prop(t, "PROCESSORS", 1) > 1
         or any(f"{p} preset" in t["name"] or t["name"].endswith(f"_{p}")
                or f"preset={p}" in " ".join(t.get("command") or []) for p in FULL_PRESETS)]
check("the default tier has no sub-build, regression, full-tier preset or both-cores entry", not heavy, heavy)
check("every entry that takes both cores holds the lock that keeps two of them apart",
      every([t for t in tests if prop(t, "PROCESSORS", 1) > 1] or [None],
            lambda t: t is None or "both_cores" in (prop(t, "RESOURCE_LOCK", []) or [])))
finish()
