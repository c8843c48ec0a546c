"""A preset's RTL parameters, as scripts/gen-spec gives them to every tool that elaborates the RTL."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def preset_params(preset, tool):
    """{'Rows': '16', ...} for the preset; exits 2 (bad usage) naming the tool on an unknown one."""
    out = subprocess.run([sys.executable, ROOT / "scripts/gen-spec", "--preset-args", preset],
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(f"{tool}: {out.stderr.strip()}", file=sys.stderr)
        sys.exit(2)
    return dict(a[2:].split("=") for a in out.stdout.split())
