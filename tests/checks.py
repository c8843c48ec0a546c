"""What the Python test scripts share: named checks, counted, with the closing "N passed, N failed"
line, and the one rule for whether a missing GPU fails or skips."""
import os
import sys

passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f"\n     {detail[-1500:]}"), flush=True)
    passed += bool(ok)
    failed += not ok


def finish():
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


def no_gpu_exit():
    """Where there is no GPU: skipped (77), or failed where scripts/gpu-check requires one
    (TESSERA_REQUIRE_GPU set and not 0)."""
    sys.exit(1 if os.environ.get("TESSERA_REQUIRE_GPU", "0") not in ("", "0") else 77)
