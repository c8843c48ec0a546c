"""What the Python test scripts share: named checks, counted, with the closing "N passed, N failed"
line; checks over collections that fail when the collection is empty; and the one rule for whether a
missing GPU fails or skips."""
import math
import os
import sys

passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f"\n     {str(detail)[-1500:]}"), flush=True)
    passed += bool(ok)
    failed += not ok


def finish():
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


def every(items, pred=bool):
    """all(pred(x) for x in items), but false for no items: a check over nothing has checked nothing."""
    items = list(items)
    return bool(items) and all(pred(x) for x in items)


def rel_l2(a, b):
    """The relative L2 distance of a from b; infinite where the lengths differ, b is empty or all zero,
    or a value is not finite, so that a short or broken dump never compares as close."""
    if len(a) != len(b) or not len(b):
        return math.inf
    den = sum(y * y for y in b)
    num = sum((x - y) ** 2 for x, y in zip(a, b))
    return math.sqrt(num / den) if den > 0 and math.isfinite(num) and math.isfinite(den) else math.inf


def reference_agrees(j, first_token=True):
    """A generation's comparison with the CPU's ids (tessera generate --json "reference") is right: its
    first divergence is where the two lists of ids first differ (None where they are the same), and,
    with first_token, the first new token (from the prompt's logits) is the CPU's."""
    ids, ref = j.get("generated_ids", []), j.get("reference", {}).get("generated_ids", [])
    first = next((i for i, (a, b) in enumerate(zip(ids, ref)) if a != b), None)
    if first is None and len(ids) != len(ref):
        first = min(len(ids), len(ref))
    d = j.get("reference", {}).get("first_divergence", "missing")
    return bool(ids) and len(ref) > 0 and d == first and (not first_token or d != 0)


def skip(reason):
    """Skipped, with the reason: ctest counts exit 77 as a skip (SKIP_RETURN_CODE)."""
    print(f"skipped: {reason}", flush=True)
    sys.exit(77)


def no_gpu_exit(reason="no GPU here"):
    """Where there is no GPU: skipped (77), or failed where scripts/gpu-check requires one
    (TESSERA_REQUIRE_GPU set and not 0)."""
    if os.environ.get("TESSERA_REQUIRE_GPU", "0") not in ("", "0"):
        print(f"FAIL: a GPU is required here: {reason}", flush=True)
        sys.exit(1)
    skip(reason)
