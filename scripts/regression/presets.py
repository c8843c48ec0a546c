"""The presets of rtl/spec/tessera.toml, and a preset's RTL parameters as scripts/gen-spec gives them
to every tool that elaborates the RTL."""
import json
import pathlib
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
_SPEC = tomllib.loads((ROOT / "rtl/spec/tessera.toml").read_text())
PRESETS = [p["name"] for p in _SPEC["preset"]]
# The quick regression's preset, and the mutants': the small engine with both precisions, so that
# one small simulator reaches the int8 and the BF16 datapaths.
QUICK_PRESET = "small-bf16"


def has_bf16(preset):
    """Whether the preset builds the BF16 precision (its int8-only twin does not)."""
    return any(p["name"] == preset and p["bf16"] for p in _SPEC["preset"])


def preset_params(preset, tool):
    """{'Rows': '16', ...} for the preset; exits 2 (bad usage) naming the tool on an unknown one."""
    out = subprocess.run([sys.executable, ROOT / "scripts/gen-spec", "--preset-args", preset],
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(f"{tool}: {out.stderr.strip()}", file=sys.stderr)
        sys.exit(2)
    return dict(a[2:].split("=") for a in out.stdout.split())


def twin(preset):
    """The same engine with BF16 (small -> small-bf16), or without it (small-bf16 -> small)."""
    return preset.removesuffix("-bf16") if preset.endswith("-bf16") else preset + "-bf16"


def trace_uses_bf16(trace_dir):
    """Whether a captured trace (tests/traces/NAME) submits a BF16 descriptor: DESC word 0's PRECISION
    field (bits 12-13) is BF16 (1). Such a trace replays on a preset with BF16 only."""
    events = json.loads((pathlib.Path(trace_dir) / "trace.json").read_text())["events"]
    return any((int.from_bytes(bytes.fromhex(d["bytes"][:8]), "little") >> 12) & 3 == 1
               for e in events for d in e.get("submit", []))
