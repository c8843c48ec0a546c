#!/usr/bin/env python3
"""The trained model (models/kjv-tiny, scripts/train-tiny): `tessera eval` in fp32 against the
independent PyTorch evaluation committed beside it (scripts/eval-torch; within 1e-3 relative), int8
and bf16 on the accelerator model against fp32, and `tessera generate` from it on the CPU, the accelerator model
and the RTL simulation (the model's ids, and its cycles within 1%: in a queue of descriptors the RTL's
arbiter keeps its state, so they differ by a few cycles each; a few tokens, as the RTL is slow).

usage: test_trained_model.py TESSERA_BINARY WITH_RTL(0|1) [--quick]
  WITH_RTL 0: a build without the RTL, such as the sanitizer builds; the RTL check is skipped, saying so.
  --quick (the default test tier): every check on one window of the held-out text (the model's
  context, 256 bytes) instead of its first 8 KB, and not the whole text against PyTorch (the full
  tier's `trained_model` does that).
Prints one line per check and 'N passed, N failed' at the end.
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from checks import check, finish, reference_agrees  # noqa: E402 (the tests' shared module)

TESSERA = sys.argv[1]
WITH_RTL = sys.argv[2] in ("1", "ON", "TRUE", "true")
QUICK = "--quick" in sys.argv[3:]
MODEL = pathlib.Path(__file__).resolve().parents[2] / "models/kjv-tiny"
HELDOUT = MODEL / "heldout.txt"


def run(*args, timeout=600):
    return subprocess.run([TESSERA, *args], capture_output=True, text=True, timeout=timeout)


def evaluate(text, plan):
    r = run("eval", "--model", str(MODEL), "--text", str(text), "--plan", plan, "--json")
    return (json.loads(r.stdout) if r.returncode == 0 else {}), r.stderr


# Under the sanitizer the whole held-out text is many minutes of CPU work; the checks below run the
# same eval code on its first 8 KB (2 KB under the sanitizer, still 15 windows of the model), and
# the unsanitized run holds the whole text to PyTorch's.
SANITIZED = bool(os.environ.get("ASAN_OPTIONS"))
PART = json.loads((MODEL / "config.json").read_text())["n_positions"] if QUICK else 2048 if SANITIZED else 8192
if SANITIZED or QUICK:
    print("     skipped " + ("in the quick check" if QUICK else "under the sanitizer") +
          ": the whole held-out text against PyTorch (the full, unsanitized run checks it)")
else:
    torch_ref = json.loads((MODEL / "eval-torch.json").read_text())
    fp32, err = evaluate(HELDOUT, "0-3@cpu")
    rel = abs(fp32.get("perplexity", 0) / torch_ref["perplexity"] - 1)
    print(f"     held-out perplexity: tessera fp32 {fp32.get('perplexity')}, PyTorch {torch_ref['perplexity']}, "
          f"relative difference {rel:.2e}")
    check("eval on the CPU (fp32) matches PyTorch's perplexity of the same checkpoint within 1e-3",
          rel < 1e-3 and fp32.get("tokens") == torch_ref["tokens"] and fp32.get("windows") == torch_ref["windows"],
          err + json.dumps(fp32))

with tempfile.TemporaryDirectory() as d:
    # The accelerator model over the first PART bytes (the whole text is minutes of simulation).
    part = pathlib.Path(d) / "heldout-part.txt"
    part.write_bytes(HELDOUT.read_bytes()[:PART])
    cpu, err_c = evaluate(part, "0-3@cpu")
    accel, err_a = evaluate(part, "0-3@model")
    gap = accel.get("perplexity", 0) / cpu.get("perplexity", 1) - 1
    print(f"     first {PART} bytes: fp32 {cpu.get('perplexity')}, int8 on the accelerator {accel.get('perplexity')} "
          f"({100 * gap:+.2f}%)")
    check("int8 on the accelerator model: perplexity within 1% of fp32's",
          accel.get("precision") == "int8" and abs(gap) < 0.01, err_c + err_a)
    if SANITIZED:  # minutes there; the sanitized unit tests run the same bf16 code paths
        print("     skipped under the sanitizer: bf16 perplexity (the unsanitized run checks it)")
    else:
        bf16, err_b = evaluate(part, "0-3@model?precision=bf16")
        gap16 = bf16.get("perplexity", 0) / cpu.get("perplexity", 1) - 1
        print(f"     first {PART} bytes: bf16 on the accelerator {bf16.get('perplexity')} ({100 * gap16:+.3f}%)")
        check("bf16 on the accelerator model: perplexity within 0.5% of fp32's",
              bf16.get("precision") == "bf16" and abs(gap16) < 0.005, err_c + err_b)
    gpu, err_g = evaluate(part, "0-3@cuda:0?precision=int8&projected=1")
    check("the projected int8 GPU computes the accelerator's arithmetic: the same perplexity",
          gpu.get("nll") == accel.get("nll") and gpu.get("precision") == "int8", err_g + json.dumps(gpu))

for plan in ("0-3@cpu", "0-3@model", "0-1@model;2-3@cpu"):
    r = run("generate", "--model", str(MODEL), "--prompt", "And God said, Let there be", "--max-new-tokens", "40",
            "--plan", plan, "--json")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    print(f"     {plan}: {j.get('text', '')!r}, first divergence from the CPU's ids: "
          f"{j.get('reference', {}).get('first_divergence')}")
    check(f"generate from the trained model on {plan}: 40 new tokens and their text",
          r.returncode == 0 and j.get("text") and len(j.get("generated_ids", [])) == 40, r.stderr)
    # The CPU plan is the reference itself; int8 agrees on the first token (the prompt's logits agree
    # top-1) and may then part: greedy decoding of a small model meets near-ties.
    check(f"generate on {plan}: " + ("the CPU's ids exactly" if plan == "0-3@cpu" else
                                     "the first token the CPU's, the first divergence where the ids part"),
          reference_agrees(j) and (plan != "0-3@cpu" or j["reference"]["first_divergence"] is None),
          json.dumps(j.get("reference")) + str(j.get("generated_ids")))
def generate(plan, prompt, new_tokens):
    r = run("generate", "--model", str(MODEL), "--prompt", prompt, "--max-new-tokens", str(new_tokens),
            "--plan", plan, "--json")
    return (json.loads(r.stdout) if r.returncode == 0 else {}), r.stderr


def accel_cycles(j):
    """Cycles per (phase, stage, op), the device named by its index in the plan."""
    return {(o["phase"], o["device"].split(":")[-1], o["op"]): o["cycles"] for o in j.get("ops", []) if o["cycles"]}


if not WITH_RTL:
    print("skip generate on the RTL simulation: this build has no RTL (TESSERA_WITH_RTL=OFF)")
else:
    rtl, err_r = generate("0-1@rtl:0;2-3@rtl:1", "And God said", 4)
    model, err_m = generate("0-1@model:0;2-3@model:1", "And God said", 4)
    rtl_cycles, model_cycles = accel_cycles(rtl), accel_cycles(model)
    worst = max((abs(model_cycles.get(k, 0) / c - 1) for k, c in rtl_cycles.items()), default=1.0)
    print(f"     rtl: {rtl.get('text', '')!r}, model: {model.get('text', '')!r}, "
          f"worst cycle difference per phase and op {100 * worst:.3f}%")
    check("generate on the RTL simulation: the model backend's ids, its cycles within 1% per phase and op",
          len(rtl.get("generated_ids", [])) == 4 and rtl.get("generated_ids") == model.get("generated_ids")
          and rtl_cycles.keys() == model_cycles.keys() and worst < 0.01, err_r + err_m)
finish()
