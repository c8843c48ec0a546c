#!/usr/bin/env python3
"""CLI contract tests (DESIGN.md): JSON keys, --dump files, exit codes and error messages.

usage: test_cli.py TESSERA_BINARY WITH_RTL(0|1)
Prints one line per check and 'N passed, N failed' at the end.
"""
import csv
import io
import json
import math
import pathlib
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from checks import check, every, finish, reference_agrees  # noqa: E402 (the tests' shared module)

ROOT = pathlib.Path(__file__).resolve().parents[2]
TESSERA = sys.argv[1]
WITH_RTL = sys.argv[2] in ("1", "ON", "TRUE", "true")
GPT2_TOKENIZER = str(pathlib.Path(__file__).resolve().parents[2] / "data/gpt2-tokenizer")  # scripts/bootstrap


def run(*args):
    return subprocess.run([TESSERA, *args], capture_output=True, text=True, timeout=300)


def read_npy(path):
    data = pathlib.Path(path).read_bytes()
    assert data[:6] == b"\x93NUMPY", "bad magic"
    hlen = struct.unpack("<H", data[8:10])[0]
    header = eval(data[10:10 + hlen].decode("latin1"))  # a Python dict literal by the format's definition
    return header, data[10 + hlen:]


GEMM_KEYS = {"schema_version", "device", "m", "n", "k", "out", "array", "dataflow", "cycles", "ideal_cycles",
             "utilization", "macs", "bit_exact", "seconds"}
INT8_KEYS = {"out_zp", "act_min", "act_max"}

devices = ["model"] + (["rtl?preset=small"] if WITH_RTL else [])
for dev in devices:
    r = run("gemm", "--device", dev, "--m", "19", "--n", "23", "--k", "41", "--json")
    check(f"{dev}: gemm int32 exits 0", r.returncode == 0, r.stderr)
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    check(f"{dev}: gemm JSON has the contract keys", GEMM_KEYS <= j.keys(), sorted(GEMM_KEYS - j.keys()))
    check(f"{dev}: schema_version 1", j.get("schema_version") == 1)
    check(f"{dev}: bit_exact", j.get("bit_exact") is True)
    if j:
        r_, c_ = j["array"]
        ideal = -(-19 * 23 * 41 // (r_ * c_))
        check(f"{dev}: ideal_cycles = ceil(MNK/RC)", j["ideal_cycles"] == ideal, j["ideal_cycles"])
        check(f"{dev}: macs = MNK", j["macs"] == 19 * 23 * 41, j["macs"])
        check(f"{dev}: utilization = ideal/cycles", abs(j["utilization"] - ideal / j["cycles"]) < 1e-9)
    r = run("gemm", "--device", dev, "--m", "8", "--n", "9", "--k", "10", "--out", "int8", "--relu", "--bias",
            "--json")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    check(f"{dev}: gemm int8 has requantization keys", (GEMM_KEYS | INT8_KEYS) <= j.keys(), r.stderr)
    check(f"{dev}: relu sets act_min = out_zp", j.get("act_min") == j.get("out_zp"))
    r = run("gemm", "--device", dev, "--m", "1", "--n", "21", "--k", "30", "--fold", "--json")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    check(f"{dev}: gemm --fold is bit-exact and says its dataflow",
          j.get("bit_exact") is True and j.get("dataflow") == "fold", r.stderr)
    # BF16 is on the presets with it: the model device named without a preset is default-bf16 then.
    bf16_dev = "rtl?preset=small-bf16" if dev.startswith("rtl") else dev
    r = run("gemm", "--device", bf16_dev, "--m", "19", "--n", "23", "--k", "41", "--precision", "bf16", "--out", "bf16",
            "--bias", "--relu", "--specials", "--json")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    check(f"{bf16_dev}: gemm --precision bf16 is bit-exact and says its precision, output and preset",
          j.get("bit_exact") is True and j.get("precision") == "bf16" and j.get("out") == "bf16"
          and "bf16" in j.get("device", ""), r.stderr + r.stdout[-300:])

with tempfile.TemporaryDirectory() as tmp:
    r = run("gemm", "--device", "model", "--m", "5", "--n", "7", "--k", "3", "--out", "int8", "--bias",
            "--dump", tmp, "--seed", "9")
    check("dump: exit 0", r.returncode == 0, r.stderr)
    expect = {"a.npy": ("|i1", (5, 3), 1), "b.npy": ("|i1", (3, 7), 1), "c.npy": ("|i1", (5, 7), 1),
              "bias.npy": ("<i4", (7,), 4), "mult.npy": ("<i4", (7,), 4), "shift.npy": ("|i1", (7,), 1)}
    for name, (dtype, shape, size) in expect.items():
        path = pathlib.Path(tmp) / name
        if not path.exists():
            check(f"dump: {name} written", False)
            continue
        h, body = read_npy(path)
        n = 1
        for d in shape:
            n *= d
        check(f"dump: {name} dtype {dtype} shape {shape}",
              h["descr"] == dtype and tuple(h["shape"]) == shape and len(body) == n * size, h)
    # The dumped operands reproduce the dumped result (int32 path, checked in Python).
    r = run("gemm", "--device", "model", "--m", "4", "--n", "6", "--k", "5", "--dump", tmp + "/i32", "--seed", "3")
    _, a = read_npy(tmp + "/i32/a.npy")
    _, b = read_npy(tmp + "/i32/b.npy")
    _, c = read_npy(tmp + "/i32/c.npy")
    a = struct.unpack("<20b", a)
    b = struct.unpack("<30b", b)
    c = struct.unpack("<24i", c)
    want = [sum(a[m * 5 + k] * b[k * 6 + n] for k in range(5)) for m in range(4) for n in range(6)]
    check("dump: c.npy equals a.npy @ b.npy", list(c) == want)

for args, needle in [
    ((), "usage"),
    (("frobnicate",), "unknown command"),
    (("gemm", "--m", "4", "--n", "4", "--k", "4"), "device"),
    (("gemm", "--device", "model", "--m", "0", "--n", "4", "--k", "4"), "--m"),
    (("gemm", "--device", "model", "--m", "4", "--n", "4", "--k", "4", "--out", "fp8"), "--out"),
    (("gemm", "--device", "model", "--m", "4", "--n", "4", "--k", "999999"), "--k"),
    (("gemm", "--device", "model", "--m", "4", "--n", "4", "--k", "5000"), "k_max"),
    (("gemm", "--device", "gpu9", "--m", "4", "--n", "4", "--k", "4"), "unknown device"),
    (("gemm", "--device", "model?preset=huge", "--m", "4", "--n", "4", "--k", "4"), "preset"),
    (("gemm", "--device", "model?colour=red", "--m", "4", "--n", "4", "--k", "4"), "unknown option"),
    (("gemm", "--device", "model?mem_w_first=1", "--m", "4", "--n", "4", "--k", "4"), "unknown option"),
    (("gemm", "--device", "rtl?preset=small&mem_w_first=2", "--m", "4", "--n", "4", "--k", "4"), "mem_w_first"),
    (("gemm", "--device", "model?reset=later", "--m", "4", "--n", "4", "--k", "4"), "reset"),
    (("gemm", "--device", "model?init_seed=3", "--m", "4", "--n", "4", "--k", "4"), "unknown option"),
    (("gemm", "--device", "rtl?preset=small&init_seed=2147483648", "--m", "4", "--n", "4", "--k", "4"), "init_seed"),
    (("gemm", "--device", "model", "--m", "four", "--n", "4", "--k", "4"), "--m"),
    (("gemm", "--device", "model", "--m", "4", "--n", "4", "--k", "4", "--relu"), "--relu"),
    (("gemm", "--device", "model", "--m", "4", "--n", "4", "--k", "4", "--bogus"), "bogus"),
    (("gemm", "--device", "model", "--m", "9", "--n", "4", "--k", "4", "--fold"), "M <= 8"),
    (("gemm", "--device", "model", "--m", "1", "--n", "4", "--k", "2049", "--fold"), "K <= 2048"),
    (("gemm", "--device", "model", "--m", "1", "--n", "4", "--k", "4", "--fold", "--bias"), "--fold"),
    (("gemm", "--device", "model?dataflow=classic", "--m", "1", "--n", "4", "--k", "4", "--fold"), "no FOLD"),
    (("gemm", "--device", "model?dataflow=fast", "--m", "1", "--n", "4", "--k", "4"), "dataflow"),
    (("gemm", "--device", "model", "--m", "4", "--n", "4", "--k", "4", "--precision", "fp8"), "--precision"),
    (("gemm", "--device", "model", "--m", "4", "--n", "4", "--k", "4", "--precision", "bf16", "--out", "int8"), "--out"),
    (("gemm", "--device", "model", "--m", "4", "--n", "4", "--k", "2049", "--precision", "bf16"), "BF16 k_max = 2048"),
    (("gemm", "--device", "model?preset=small", "--m", "4", "--n", "4", "--k", "4", "--precision", "bf16"),
     "preset=small-bf16 is the same engine with BF16"),
    (("gemm", "--device", "model?preset=default&precision=bf16", "--m", "4", "--n", "4", "--k", "4"), "no BF16"),
    (("gemm", "--device", "model", "--m", "4", "--n", "4", "--k", "4", "--specials"), "--specials"),
    (("gemm", "--device", "model?precision=fp16", "--m", "4", "--n", "4", "--k", "4"), "precision"),
    (("validate",), "--device"),
    (("validate", "--device", "model", "--level", "extreme"), "level"),
    (("validate", "--device", "model?fault=melt"), "fault"),
    (("validate", "--device", "model?preset=small&fault=stuck:9,0,1"), "no PE"),
    (("validate", "--device", "model", "--duration", "-1"), "--duration"),
    (("plan", "--plan", "0@cpu"), "no stage runs layer 1"),
    (("plan", "--plan", "0-1@tpu"), "unknown device"),
    (("plan", "--plan", "0-1@model:0+model:1+model:2+model:3+model:4"), "heads"),
    (("plan", "--model", "/nonexistent-model"), "does not exist"),
    (("plan", "--batch", "2", "--microbatches", "3"), "microbatch"),
    (("run", "--plan", "0-1@model", "--tokens", "1,2,512"), "outside the vocabulary"),
    (("run", "--plan", "0-1@model", "--tokens", "1,x"), "not a token id"),
    (("run", "--plan", "0-1@model", "--tokens", "1,2", "--batch", "2"), "not both"),
    (("run", "--plan", "0-1@model", "--seq", "300"), "positions"),
    (("run", "--model", "/nonexistent-model"), "does not exist"),
    (("run", "--plan", "0-1@model", "--json", "--csv"), "not both"),
    (("run", "--model", "random:2,100,3", "--plan", "0-1@cpu"), "does not divide"),
    (("run", "--model", "random:2,x,3", "--plan", "0-1@cpu"), "random:LAYERS"),
    (("run", "--plan", "0-1@model", "--project-array", "64"), "RxC"),
    (("run", "--plan", "0-1@model", "--project-clock-mhz", "900"), "needs --project-array"),
    (("generate", "--plan", "0-1@cpu"), "give --prompt or --tokens"),
    (("generate", "--plan", "0-1@cpu", "--prompt", "hi"), "needs a tokenizer"),
    (("generate", "--plan", "0-1@cpu", "--tokens", "1,2", "--max-new-tokens", "300"), "positions"),
    (("generate", "--plan", "0-1@cpu", "--tokens", ",".join(["1"] * 300)), "positions"),
    (("generate", "--plan", "0-1@cpu", "--tokens", "1,600"), "outside the vocabulary"),
    (("generate", "--plan", "0-1@cpu", "--tokens", "1", "--temperature", "-1"), "--temperature"),
    (("generate", "--plan", "0-1@cpu", "--tokens", "1", "--top-p", "2"), "--top-p"),
    (("generate", "--plan", "0-1@cpu", "--tokens", "1", "--tokenizer", "/nonexistent"), "no tokenizer in"),
    (("generate", "--model", "random:2,64,2,1000", "--tokenizer", GPT2_TOKENIZER, "--prompt", "x", "--plan", "0-1@cpu"),
     "more than the model's vocabulary"),
    (("bench", "-o", "xml"), "md, csv or json"),
    (("bench", "-p", "0"), "not a positive count"),
    (("bench", "-n", "999", "--plan", "0-1@cpu"), "positions"),
    (("bench", "--plan", "0-1@cpu,0@tpu"), "unknown device"),
    (("run", "--plan", "0-1@cpu,,0-1@model"), "an empty plan"),
    (("run", "--plan", "0-1@cpu,0-1@model", "--trace", "/tmp/unused.json"), "take one plan"),
    (("plan", "--plan", "0-1@cpu,0-1@model"), "takes one"),
    (("generate", "--plan", "0-1@cpu,0-1@model", "--tokens", "1", "--capture", "/tmp/unused"), "take one plan"),
    (("tokenize", "--tokenizer", GPT2_TOKENIZER), "one of --text, --file or --decode"),
    (("tokenize", "--tokenizer", GPT2_TOKENIZER, "--text", "a", "--decode", "1"), "one of --text"),
    (("tokenize", "--tokenizer", GPT2_TOKENIZER, "--decode", "464,50257"), "outside the vocabulary"),
    (("tokenize", "--tokenizer", GPT2_TOKENIZER, "--decode", "464,dog"), "not a token id"),
    (("tokenize", "--tokenizer", GPT2_TOKENIZER, "--file", "/nonexistent"), "cannot read"),
    (("tokenize", "--tokenizer", "/nonexistent", "--text", "a"), "no tokenizer in"),
]:
    r = run(*args)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    check(f"bad usage {' '.join(args)[:150] or '(none)'}: exit 2 with a message naming '{needle}'",
          r.returncode == 2 and lines and needle in r.stderr, f"rc={r.returncode} stderr={r.stderr!r}")

r = run("tokenize", "--tokenizer", GPT2_TOKENIZER, "--text", "The dog")
check("tokenize: GPT-2's ids, comma-separated", r.returncode == 0 and r.stdout == "464,3290\n", r.stdout + r.stderr)
r = run("tokenize", "--tokenizer", GPT2_TOKENIZER, "--text", "naïve café", "--json")
j = json.loads(r.stdout) if r.returncode == 0 else {}
check("tokenize --json: ids and their tokens", j.get("ids") and len(j["ids"]) == len(j.get("tokens", []))
      and "".join(j["tokens"]) == "naïve café", r.stdout + r.stderr)
r = run("tokenize", "--tokenizer", GPT2_TOKENIZER, "--decode", ",".join(map(str, j.get("ids", []))))
check("tokenize --decode: the text back, as it is", r.returncode == 0 and r.stdout == "naïve café", r.stdout + r.stderr)

def byte_model_dir(path, seed=1):
    """A GPT-2 of 2 layers, width 64 and 64 positions with random weights, and a byte-level tokenizer
    (GPT-2's first 256 tokens, no merges), written as a Hugging Face model directory."""
    enc = json.loads((pathlib.Path(GPT2_TOKENIZER) / "encoder.json").read_text())
    (path / "vocab.json").write_text(json.dumps({t: i for t, i in enc.items() if i < 256}))
    (path / "merges.txt").write_text("#version: 0.2\n")
    E, V, P = 64, 256, 64
    (path / "config.json").write_text(json.dumps({"n_embd": E, "n_head": 2, "n_layer": 2, "n_positions": P,
                                                  "vocab_size": V, "layer_norm_epsilon": 1e-5}))
    shapes = {"wte.weight": [V, E], "wpe.weight": [P, E], "ln_f.weight": [E], "ln_f.bias": [E]}
    for i in range(2):
        for name, shape in [("ln_1", [E]), ("ln_2", [E])]:
            shapes[f"h.{i}.{name}.weight"], shapes[f"h.{i}.{name}.bias"] = shape, shape
        for name, (n_in, n_out) in [("attn.c_attn", (E, 3 * E)), ("attn.c_proj", (E, E)), ("mlp.c_fc", (E, 4 * E)),
                                    ("mlp.c_proj", (4 * E, E))]:
            shapes[f"h.{i}.{name}.weight"], shapes[f"h.{i}.{name}.bias"] = [n_in, n_out], [n_out]
    rng = random.Random(seed)
    header, data = {}, b""
    for name, shape in shapes.items():
        n = 1
        for d in shape:
            n *= d
        ones = name.endswith(".weight") and ("ln_" in name)
        values = [1.0] * n if ones else [rng.gauss(0, 0.1 if name.startswith("w") else 0.05) for _ in range(n)]
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + 4 * n]}
        data += struct.pack(f"<{n}f", *values)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    (path / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + data)


EVAL_KEYS = {"perplexity", "tokens", "nll", "plan", "precision", "windows"}
with tempfile.TemporaryDirectory() as d:
    model = pathlib.Path(d) / "model"
    model.mkdir()
    byte_model_dir(model)
    text = pathlib.Path(d) / "text.txt"
    text.write_text("In the beginning was the word, and the word was with the engine.\n" * 3)
    r = run("eval", "--model", str(model), "--text", str(text), "--plan", "0-1@cpu", "--window", "48", "--stride", "16",
            "--json")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    check("eval --json: the contract keys", r.returncode == 0 and EVAL_KEYS <= j.keys(), r.stderr)
    check("eval: every byte token after the first scored once, perplexity = exp(mean NLL)",
          j.get("tokens") == len(text.read_bytes()) - 1 and abs(j.get("perplexity", 0) - math.exp(j.get("nll", 0))) < 1e-9
          and j.get("precision") == "fp32", str(j))
    r = run("eval", "--model", str(model), "--text", str(text), "--plan", "0-1@model", "--window", "48", "--stride", "16",
            "--json")
    k = json.loads(r.stdout) if r.returncode == 0 else {}
    check("eval on the accelerator model: int8, within 2% of fp32's perplexity",
          k.get("precision") == "int8" and abs(k.get("perplexity", 0) / j.get("perplexity", 1) - 1) < 0.02, str(k))
    r = run("eval", "--model", str(model), "--text", str(text), "--plan", "0-1@cpu,0-1@model,0-1@model?precision=bf16",
            "--window", "48", "--stride", "16", "--json")
    runs = (json.loads(r.stdout) if r.returncode == 0 else {}).get("runs", [])
    check("eval with several plans --json: a perplexity per plan and precision, the same as each alone",
          [x["precision"] for x in runs] == ["fp32", "int8", "bf16"] and runs[0]["perplexity"] == j.get("perplexity")
          and runs[1]["perplexity"] == k.get("perplexity")
          and abs(runs[2]["perplexity"] / j.get("perplexity", 1) - 1) < 0.005, r.stdout[-600:] + r.stderr)
    r = run("generate", "--model", str(model), "--prompt", "The engine", "--max-new-tokens", "5", "--plan", "0-1@cpu")
    check("generate: a model directory's own tokenizer takes --prompt", r.returncode == 0
          and r.stdout.startswith("The engine"), r.stdout[-300:] + r.stderr)
    for args, needle in [(("--text", "/nonexistent"), "cannot read"), (("--text", str(text), "--window", "65"), "positions"),
                         (("--text", str(text), "--stride", "100", "--window", "32"), "stride")]:
        r = run("eval", "--model", str(model), "--plan", "0-1@cpu", *args)
        check(f"eval {' '.join(args)}: exit 2 naming '{needle}'", r.returncode == 2 and needle in r.stderr, r.stderr)
    r = run("eval", "--model", "tiny", "--text", str(text), "--plan", "0-1@cpu")
    check("eval on a model without a tokenizer: exit 2", r.returncode == 2 and "no tokenizer" in r.stderr, r.stderr)

r = run("bench", "-p", "8,16", "-n", "4", "--batch", "2", "--plan", "0-1@model,0-1@cpu", "-o", "json")
j = json.loads(r.stdout) if r.returncode == 0 else {}
rows = [(x["plan"], x["test"]) for x in j.get("results", [])]
check("bench -o json: pp and tg per plan, tokens/s on the devices' clocks, labelled",
      rows == [(p, t) for p in ("0-1@model:0", "0-1@cpu") for t in ("pp8", "pp16", "tg4")]
      and all(x["tokens_per_s"] > 0 and x["batch"] == 2 and x["time"] for x in j["results"])
      and j["results"][0]["time"] == "cycles / clock + measured", r.stdout[-600:] + r.stderr)
r = run("bench", "-p", "8", "-n", "2", "--plan", "0-1@cpu")
check("bench: a markdown table by default", r.returncode == 0 and "| tiny | 0-1@cpu | fp32 | 1 | pp8 |" in r.stdout,
      r.stdout)

# Several plans side by side: the precisions of the accelerator and of the (projected) GPU.
PLANS = "0-1@cpu,0-1@model,0-1@model?precision=bf16,0-1@cuda:0?precision=bf16&projected=1"
r = run("run", "--plan", PLANS, "--batch", "2", "--seq", "16", "--json")
j = json.loads(r.stdout) if r.returncode == 0 else {}
runs = j.get("runs", [])
check("run with several plans --json: each plan's run object, in order, with its precision's numerics",
      [x["plan"] for x in runs] == ["0-1@cpu", "0-1@model:0", "0-1@model:0?precision=bf16",
                                    "0-1@cuda:0?precision=bf16&projected=1"]
      and runs[0]["numerics"]["rel_l2"] == 0 and 0 < runs[2]["numerics"]["rel_l2"] < runs[1]["numerics"]["rel_l2"]
      and all(x["numerics"]["top1_agreement"] == 1.0 for x in runs), r.stdout[-600:] + r.stderr)
r = run("run", "--plan", PLANS, "--batch", "2", "--seq", "16")
lines = {l.split()[0]: l.split() for l in r.stdout.splitlines() if l.startswith("0-1@")}
check("run with several plans: a row per plan with its precision", r.returncode == 0
      and [lines.get(p, [None, None])[1] for p in ("0-1@cpu", "0-1@model:0", "0-1@model:0?precision=bf16")]
      == ["fp32", "int8", "bf16"], r.stdout + r.stderr)
r = run("generate", "--tokens", "5,6,7", "--max-new-tokens", "4", "--plan", PLANS, "--json")
j = json.loads(r.stdout) if r.returncode == 0 else {}
runs = j.get("runs", [])
check("generate with several plans --json: per plan its precision, rates and the ids against fp32's",
      [x.get("precision") for x in runs] == ["fp32", "int8", "bf16", "bf16"]
      and all(len(x["generated_ids"]) == 4 and x["decode"]["tokens_per_s"] > 0 for x in runs)
      and runs[0]["reference"]["first_divergence"] is None, r.stdout[-600:] + r.stderr)
r = run("bench", "-p", "8", "-n", "2", "--plan", "0-1@model,0-1@model?precision=bf16", "-o", "csv")
rows = list(csv.DictReader(io.StringIO(r.stdout))) if r.returncode == 0 else []
check("bench -o csv: a precision per plan, no warm-up on a simulated device, no roofline without a GPU",
      [x["precision"] for x in rows] == ["int8", "int8", "bf16", "bf16"]
      and every(rows, lambda x: x["warmup"] == "0" and x["roofline_fraction"] == ""), r.stdout)

r = run("bench", "-p", "8", "-n", "2", "--plan", "0-1@cpu,0-1@cuda:0?projected=1&precision=bf16", "-o", "json")
res = json.loads(r.stdout)["results"] if r.returncode == 0 else []
cpu_rows, gpu_rows = [x for x in res if x["plan"] == "0-1@cpu"], [x for x in res if "cuda" in x["plan"]]
check("bench: the CPU's tests after one untimed warm-up, without a roofline",
      len(cpu_rows) == 2 and every(cpu_rows, lambda x: x["warmup"] == 1 and x["roofline"] is None
                                   and x["time"] == "measured"), r.stdout[-800:] + r.stderr)
check("bench: a projected GPU's rows say so, with the H100's roofline and their fraction of it",
      len(gpu_rows) == 2 and every(gpu_rows, lambda x: "projected" in x["time"] and x["warmup"] == 0
                                   and x["roofline"]["gpu"] == "h100" and 0 < x["roofline"]["fraction"] <= 1.0
                                   and x["energy"] == "projected" and x["above_idle_j_per_token"] is None),
      r.stdout[-800:] + r.stderr)
r = run("bench", "-p", "4", "-n", "1", "--plan", "0-1@cpu", "--warmup", "2", "-o", "json")
check("bench --warmup 2: two untimed runs", r.returncode == 0
      and every(json.loads(r.stdout)["results"], lambda x: x["warmup"] == 2), r.stdout[-400:] + r.stderr)

GENERATE_KEYS = {"text", "prompt_ids", "generated_ids", "ttft_s", "prefill", "decode", "ops", "reference", "stop"}
r = run("generate", "--model", "random:2,64,2,50257,128", "--tokenizer", GPT2_TOKENIZER, "--prompt", "The dog",
        "--max-new-tokens", "6", "--plan", "0@model;1@cpu", "--json")
j = json.loads(r.stdout) if r.returncode == 0 else {}
check("generate --json: the contract keys", r.returncode == 0 and GENERATE_KEYS <= j.keys(), r.stderr + r.stdout[-300:])
check("generate: the prompt's ids, six new ids, and their text",
      j.get("prompt_ids") == [464, 3290] and len(j.get("generated_ids", [])) == 6 and isinstance(j.get("text"), str))
check("generate: prefill and decode tokens, rates and latencies, each time labelled",
      j.get("prefill", {}).get("tokens") == 2 and j.get("decode", {}).get("tokens") == 5
      and j.get("decode", {}).get("tokens_per_s", 0) > 0 and {"median", "p90"} <= j.get("decode", {}).get("latency_ms", {}).keys()
      and j.get("prefill", {}).get("time") and j.get("ttft_s") == j.get("prefill", {}).get("seconds"), str(j)[:800])
check("generate: ops per phase and device, accelerator time from cycles",
      {("prefill", "model:0"), ("decode", "model:0"), ("decode", "cpu")} <= {(o["phase"], o["device"]) for o in j.get("ops", [])}
      and all(o["time"] == "cycles / clock" for o in j.get("ops", []) if o["device"] == "model:0"))
check("generate: the KV caches' bytes (2 layers x keys and values x width 64 x 7 positions x fp32)",
      j.get("kv_cache_bytes") == 2 * 2 * 64 * 7 * 4, j.get("kv_cache_bytes"))
check("generate: the CPU's ids beside them, the first divergence where they part (or none), the first token agreeing",
      reference_agrees(j), json.dumps(j.get("reference")) + str(j.get("generated_ids")))
r = run("generate", "--model", "random:2,64,2,50257,128", "--tokenizer", GPT2_TOKENIZER, "--prompt", "The dog",
        "--max-new-tokens", "4", "--plan", "0-1@cpu", "--temperature", "0.9", "--top-k", "50", "--seed", "4")
check("generate text: the prompt streamed with the new text, then the per-phase table and rates",
      r.returncode == 0 and r.stdout.startswith("The dog") and "time to first token" in r.stdout
      and "decode: 3 tokens" in r.stdout, r.stdout[-800:] + r.stderr)
r2 = run("generate", "--model", "random:2,64,2,50257,128", "--tokenizer", GPT2_TOKENIZER, "--prompt", "The dog",
         "--max-new-tokens", "4", "--plan", "0-1@cpu", "--temperature", "0.9", "--top-k", "50", "--seed", "4")
check("generate: the same seed samples the same text", r.stdout.split("\n")[0] == r2.stdout.split("\n")[0])
r = run("generate", "--model", "random:2,64,2,50304,128", "--tokenizer", GPT2_TOKENIZER, "--prompt", "The dog",
        "--max-new-tokens", "8", "--plan", "0-1@cpu", "--temperature", "2", "--json")
j = json.loads(r.stdout) if r.returncode == 0 else {}
check("generate: a vocabulary padded past the tokenizer's never yields an id the tokenizer lacks",
      r.returncode == 0 and j.get("generated_ids") and max(j["generated_ids"]) < 50257, r.stderr + str(j.get("generated_ids")))
r = run("generate", "--tokens", "1,2,3", "--max-new-tokens", "3", "--plan", "0-1@model", "--csv")
check("generate --csv: a row per phase, device and op", r.returncode == 0
      and r.stdout.startswith("phase,device,op,calls,seconds,time") and "\ndecode,model:0,qkv," in r.stdout, r.stdout[:400])

r = run("devices", "--json")
j = json.loads(r.stdout) if r.returncode == 0 else {}
check("devices --json: exit 0 and schema_version 1", r.returncode == 0 and j.get("schema_version") == 1, r.stderr)
kinds = {d["kind"]: d for d in j.get("devices", [])}
check("devices: lists model, rtl, xdma, cpu, cuda", {"model", "rtl", "xdma", "cpu", "cuda"} <= kinds.keys())
check("devices: model available with its array", kinds.get("model", {}).get("array") == [16, 16])
gpus = [d for d in j.get("devices", []) if d["kind"] == "cuda"]
check("devices: each GPU with its name, memory, compute capability and UUID, or one absent entry with the reason",
      gpus and (all(d["available"] and d["name"] and d["mem_bytes"] > 0 and d["compute_capability"] and len(d["uuid"]) == 32
                    for d in gpus) or (len(gpus) == 1 and not gpus[0]["available"] and "GPU" in gpus[0]["reason"])
                or (len(gpus) == 1 and not gpus[0]["available"] and "no CUDA backend" in gpus[0]["reason"])), gpus)
GPU_PRESENT = any(d["available"] for d in gpus)
check("devices: no FPGA card here, said plainly", kinds.get("xdma", {}).get("available") is False
      and "card" in kinds.get("xdma", {}).get("reason", ""))
if WITH_RTL:
    check("devices: rtl available", kinds.get("rtl", {}).get("available") is True, kinds.get("rtl"))
    # The simulator's presets: those its build verilated (a default-tier build has no large one); a
    # preset it lacks is bad usage that says how to build it.
    spec_presets, rtl_presets = kinds.get("model", {}).get("presets", []), kinds.get("rtl", {}).get("presets", [])
    check("devices: rtl lists the presets its simulator has, among the spec's, the small one always",
          "small" in rtl_presets and set(rtl_presets) <= set(spec_presets), (rtl_presets, spec_presets))
    for preset in sorted(set(spec_presets) - set(rtl_presets)):
        r = run("gemm", "--device", f"rtl?preset={preset}", "--m", "4", "--n", "4", "--k", "4")
        check(f"gemm on rtl?preset={preset}, which this build has not verilated: exit 2, saying how to build it",
              r.returncode == 2 and "TESSERA_TEST_TIER=full" in r.stderr, (r.returncode, r.stderr[-500:]))

VALIDATE_KEYS = {"schema_version", "device", "level", "result", "tests"}
r = run("validate", "--device", "model", "--json")
j = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
check("validate --json: exit 0, the contract keys, result pass", r.returncode == 0 and VALIDATE_KEYS <= j.keys()
      and j.get("result") == "pass" and j.get("level") == "quick", r.stdout[-500:] + r.stderr)
check("validate: every test has name, result, detail, seconds",
      all(set(t) == {"name", "result", "detail", "seconds"} for t in j.get("tests", [])) and len(j.get("tests", [])) >= 6)
r = run("validate", "--device", "model?preset=small&fault=stuck:1,2,3")
check("validate text: a table, the verdict, exit 1 on a faulty device",
      r.returncode == 1 and "CHECK" in r.stdout and "verdict: fail" in r.stdout and "faulty PE at row 1, column 2" in r.stdout,
      r.stdout[-800:])
r = run("validate", "--device", "xdma:/dev/xdma-none", "--json")
j = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
check("validate: no card is a failed open check, not a crash", r.returncode == 1 and j.get("result") == "fail"
      and j["tests"][0]["name"] == "open" and "no XDMA card" in j["tests"][0]["detail"], r.stdout[-500:] + r.stderr)

r = run("plan", "--plan", "0@model:0+model:1;1@cpu", "--batch", "4", "--microbatches", "2", "--json")
j = json.loads(r.stdout) if r.returncode == 0 else {}
check("plan --json: stages, devices with shares and bytes, theoretical bubble",
      r.returncode == 0 and j.get("schema_version") == 1 and len(j.get("stages", [])) == 2
      and j["stages"][0]["devices"][1]["heads"] == [2, 4] and j["stages"][1]["devices"][0]["weight_bytes"] > 0
      and abs(j["bubble"]["theoretical"] - 1 / 3) < 1e-9, r.stdout[-500:] + r.stderr)
r = run("plan")
check("plan with no arguments: the tiny model on rtl:0", r.returncode == 0 and "0-1@rtl:0" in r.stdout, r.stdout + r.stderr)

RUN_KEYS = {"schema_version", "plan", "devices", "ops", "numerics", "bubble", "totals"}
with tempfile.TemporaryDirectory() as d:
    r = run("run", "--plan", "0@model:0+model:1;1@model:2*1+cpu*1", "--batch", "2", "--seq", "16",
            "--microbatches", "2", "--dump", d, "--json")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    check("run --json: exit 0 and the contract keys", r.returncode == 0 and RUN_KEYS <= j.keys(), r.stderr)
    num = j.get("numerics", {})
    check("run: int8 numerics against fp32 within the targets (cosine >= 0.995, top-1 >= 0.95)",
          num.get("cosine", 0) >= 0.995 and num.get("top1_agreement", 0) >= 0.95, num)
    check("run: every device of the plan reports ops", {o["device"] for o in j.get("ops", [])} >=
          {"model:0", "model:1", "model:2", "cpu", "host"}, j.get("ops"))
    check("run: bubble measured and theoretical", abs(j.get("bubble", {}).get("theoretical", 0) - 1 / 3) < 1e-9
          and 0 <= j.get("bubble", {}).get("measured", -1) < 1)
    header, data = read_npy(f"{d}/logits.npy") if pathlib.Path(f"{d}/logits.npy").exists() else ({}, b"")
    check("run --dump: logits.npy float32 [tokens, vocab]", header.get("descr") == "<f4"
          and tuple(header.get("shape", ())) == (32, 512) and len(data) == 32 * 512 * 4, header)
with tempfile.TemporaryDirectory() as d:
    r = run("run", "--plan", "0@model:0+cpu;1@model:1", "--batch", "2", "--microbatches", "2", "--trace", f"{d}/t.json")
    t = json.loads(pathlib.Path(f"{d}/t.json").read_text()) if r.returncode == 0 else {}
    slices = [e for e in t.get("traceEvents", []) if e.get("ph") == "X"]
    names = {e["args"]["name"] for e in t.get("traceEvents", []) if e.get("ph") == "M"}
    check("run --trace: Chrome trace events, a process per device and the host, cycles on accelerator slices",
          r.returncode == 0 and {"cpu", "model:0", "model:1"} <= names and len(slices) > 10
          and any("cycles" in e["args"] for e in slices) and all(e["dur"] >= 0 for e in slices)
          and {"dma", "compute"} <= {e.get("cat") for e in slices}, r.stderr)
r = run("run", "--plan", "0@model;1@cuda:0?gpu=a100&projected=1", "--json")
j = json.loads(r.stdout) if r.returncode == 0 else {}
gpu = [o for o in j.get("ops", []) if o["device"].startswith("cuda")]
check("run: a projected GPU's rows are labelled projected, never measured",
      r.returncode == 0 and gpu and all(o["time"] == "projected" and o["seconds"] > 0 for o in gpu), r.stderr)
r = run("run", "--plan", "0@model;1@cuda:0", "--json")
j = json.loads(r.stdout) if r.returncode == 0 else {}
gpu = [o for o in j.get("ops", []) if o["device"].startswith("cuda")]
want = "measured" if GPU_PRESENT else "projected"
check(f"run: cuda:0 is {want} where `devices` says a GPU is {'present' if GPU_PRESENT else 'absent'}",
      r.returncode == 0 and gpu and all(o["time"] == want for o in gpu), r.stderr)
with tempfile.TemporaryDirectory() as d:
    # A projected int8 GPU is computed with the accelerator's quantization: the same logits, bit for
    # bit, as the model device gives.
    r = run("run", "--plan", "0-1@cuda:0?precision=int8&projected=1", "--json", "--dump", f"{d}/gpu")
    q = run("run", "--plan", "0-1@model", "--dump", f"{d}/accel")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    same = r.returncode == 0 and q.returncode == 0 and \
        read_npy(f"{d}/gpu/logits.npy")[1] == read_npy(f"{d}/accel/logits.npy")[1]
    ops = {(o["device"], o["op"]) for o in j.get("ops", [])}
    check("run: an int8 GPU row gives the accelerator's int8 logits and runs LayerNorm on the GPU",
          same and j["numerics"]["rel_l2"] > 0 and ("cuda:0?precision=int8&projected=1", "layernorm") in ops
          and ("host", "softmax") not in ops, r.stderr + q.stderr)
r = run("run", "--plan", "0-1@cuda:0?precision=fp8")
check("run: an unknown GPU precision is bad input", r.returncode == 2 and "fp32, bf16 or int8" in r.stderr, r.stderr)
r = run("run", "--plan", "0-1@cuda:0?gpu=tpu")
check("run: an unknown GPU for the projection is bad input", r.returncode == 2 and "unknown GPU" in r.stderr, r.stderr)
r = run("run", "--plan", "0-1@model?fault=stuck:1,1,20")
check("run: a device that fails its quick check is refused loudly (exit 1)",
      r.returncode == 1 and "failed its quick health check" in r.stderr and "faulty PE" in r.stderr, r.stderr)
r = run("run", "--plan", "0-1@cpu,0-1@model?fault=stuck:1,1,20")
check("run with several plans: a device option's commas stay in its plan (the faulty device refused, exit 1)",
      r.returncode == 1 and "faulty PE" in r.stderr, r.stderr)
r = run("run", "--model", "random:3,64,4,100,16", "--plan", "0-2@model", "--seq", "16", "--json")
j = json.loads(r.stdout) if r.returncode == 0 else {}
check("run --model random:...: a model of that shape", r.returncode == 0 and j.get("model") == "random:3,64,4,100,16"
      and j["numerics"]["cosine"] > 0.99, r.stderr)
r = run("run", "--plan", "0-1@model", "--project-array", "8x8", "--json")
j = json.loads(r.stdout) if r.returncode == 0 else {}
pr = j.get("projection", {})
check("run --project-array: a slower 8x8 array takes more cycles than the 16x16 one that ran",
      r.returncode == 0 and pr.get("array") == [8, 8] and pr.get("cycles", 0) > j["totals"]["cycles"]
      and all("projected" in o for o in j["ops"] if o["device"] == "model:0"), r.stderr + r.stdout[-300:])
r = run("run", "--plan", "0-1@model", "--csv")
check("run --csv: a header and one row per device and op", r.returncode == 0
      and r.stdout.splitlines()[0].startswith("device,op,") and len(r.stdout.splitlines()) > 5, r.stdout[:300])
def write_checkpoint(d, tensors, header_extra=None, truncate=0):
    """A GPT-2 directory with a 1-layer, width-8 config and the given F32 tensors {name: (shape, n)}."""
    pathlib.Path(d).mkdir(parents=True, exist_ok=True)
    pathlib.Path(f"{d}/config.json").write_text(json.dumps(
        {"n_embd": 8, "n_head": 2, "n_layer": 1, "n_positions": 4, "vocab_size": 10}))
    header, data = {}, b""
    for name, shape in tensors.items():
        n = 1
        for x in shape:
            n *= x
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + 4 * n]}
        data += struct.pack(f"<{n}f", *([0.01] * n))
    header.update(header_extra or {})
    h = json.dumps(header).encode()
    blob = struct.pack("<Q", len(h)) + h + data
    pathlib.Path(f"{d}/model.safetensors").write_bytes(blob[:len(blob) - truncate])


GOOD = {"wte.weight": [10, 8], "wpe.weight": [4, 8], "ln_f.weight": [8], "ln_f.bias": [8]}
for i, (name, shape) in enumerate([("ln_1.weight", [8]), ("ln_1.bias", [8]), ("attn.c_attn.weight", [8, 24]),
                                    ("attn.c_attn.bias", [24]), ("attn.c_proj.weight", [8, 8]), ("attn.c_proj.bias", [8]),
                                    ("ln_2.weight", [8]), ("ln_2.bias", [8]), ("mlp.c_fc.weight", [8, 32]),
                                    ("mlp.c_fc.bias", [32]), ("mlp.c_proj.weight", [32, 8]), ("mlp.c_proj.bias", [8])]):
    GOOD[f"h.0.{name}"] = shape
with tempfile.TemporaryDirectory() as d:
    write_checkpoint(f"{d}/good", GOOD)
    r = run("run", "--model", f"{d}/good", "--plan", "0@cpu", "--tokens", "1,2,3", "--json")
    check("run --model DIR: a checkpoint written here loads and runs", r.returncode == 0, r.stderr)
    cases = {
        "truncated": ({}, None, 100, "model.safetensors"),
        "missing tensor": ({k: v for k, v in GOOD.items() if k != "h.0.mlp.c_fc.bias"}, None, 0, "h.0.mlp.c_fc.bias"),
        "wrong shape": ({**GOOD, "h.0.ln_1.weight": [4, 2]}, None, 0, "h.0.ln_1.weight"),
        "unknown dtype": (GOOD, {"h.0.ln_2.bias": {"dtype": "Q7", "shape": [8], "data_offsets": [0, 8]}}, 0, "Q7"),
        "offsets past the data": (GOOD, {"h.0.ln_2.bias": {"dtype": "F32", "shape": [8],
                                                          "data_offsets": [100000, 100032]}}, 0, "h.0.ln_2.bias"),
    }
    for label, (tensors, extra, cut, needle) in cases.items():
        write_checkpoint(f"{d}/{label}", tensors or GOOD, extra, cut)
        r = run("run", "--model", f"{d}/{label}", "--plan", "0@cpu", "--tokens", "1,2,3")
        check(f"run --model with a bad checkpoint ({label}): exit 2 naming '{needle}'",
              r.returncode == 2 and needle in r.stderr, f"rc={r.returncode} {r.stderr!r}")
    pathlib.Path(f"{d}/good/config.json").write_text(json.dumps(
        {"n_embd": 8, "n_head": 3, "n_layer": 1, "n_positions": 4, "vocab_size": 10}))
    r = run("run", "--model", f"{d}/good", "--plan", "0@cpu", "--tokens", "1")
    check("run --model: heads that do not divide the width are bad input", r.returncode == 2 and "divide" in r.stderr,
          r.stderr)

PLOT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "plot"
with tempfile.TemporaryDirectory() as d:
    r = run("run", "--plan", "0@model;1@cpu", "--project-array", "32x32", "--csv")
    pathlib.Path(f"{d}/run.csv").write_text(r.stdout)
    for ext in ("png", "svg"):
        p = subprocess.run([sys.executable, str(PLOT), f"{d}/run.csv", "-o", f"{d}/run.{ext}"], capture_output=True, text=True)
        out = pathlib.Path(f"{d}/run.{ext}")
        check(f"scripts/plot: a {ext} chart of a run's CSV", p.returncode == 0 and out.exists() and out.stat().st_size > 1000,
              p.stderr)
    pathlib.Path(f"{d}/bad.csv").write_text("a,b\n1,2\n")
    p = subprocess.run([sys.executable, str(PLOT), f"{d}/bad.csv", "-o", f"{d}/bad.png"], capture_output=True, text=True)
    check("scripts/plot: a CSV that is not a run's is refused with the reason", p.returncode != 0 and "not a tessera run" in p.stderr)

with tempfile.TemporaryDirectory() as d:
    r = run("gemm", "--device", "model", "--m", "9", "--n", "21", "--k", "30", "--capture", f"{d}/g")
    p = run("replay", f"{d}/g", "--device", "model?preset=small", "--json")
    j = json.loads(p.stdout) if p.returncode == 0 else {}
    check("gemm --capture, then replay on another preset: every output byte checked, cycles recorded and replayed",
          r.returncode == 0 and j.get("result") == "pass" and j.get("bytes_checked", 0) > 9 * 21
          and j["cycles"]["recorded"] > 0 and j["cycles"]["replayed"] > j["cycles"]["recorded"], p.stderr)
    p = run("replay", f"{d}/g", "--device", "model?fault=stuck:1,1,30", "--json")
    j = json.loads(p.stdout) if p.stdout.startswith("{") else {}
    check("replay on a faulty device: exit 1, the first wrong byte named with its output element and descriptor",
          p.returncode == 1 and j.get("result") == "fail" and "C[1][17] of descriptor 0" in j.get("first_mismatch", ""),
          p.stdout + p.stderr)
    r = run("gemm", "--device", "model", "--m", "4", "--n", "4", "--k", "4", "--capture", f"{d}/g")
    check("gemm --capture into a directory that is not empty is bad usage", r.returncode == 2 and "not empty" in r.stderr,
          r.stderr)
    data = pathlib.Path(f"{d}/g/data.bin")
    raw = bytearray(data.read_bytes())
    raw[5] ^= 0xFF
    data.write_bytes(raw)
    p = run("replay", f"{d}/g")
    check("replay of a corrupted trace: exit 2 naming the CRC", p.returncode == 2 and "CRC-32" in p.stderr, p.stderr)
    p = run("replay", f"{d}/none")
    check("replay of a directory without a trace: exit 2", p.returncode == 2 and "no trace.json" in p.stderr, p.stderr)
    r = run("run", "--plan", "0@model;1@model:1", "--capture", f"{d}/run")
    traces = sorted(x.name for x in pathlib.Path(f"{d}/run").glob("*")) if r.returncode == 0 else []
    p = run("replay", f"{d}/run/model_1", "--device", "model") if traces else r
    check("run --capture: a trace per accelerator that replays", traces == ["model_0", "model_1"] and p.returncode == 0,
          r.stderr + p.stderr)

if WITH_RTL:
    r = run("run", "--plan", "0@rtl:0+rtl:1?preset=small;1@rtl:2", "--batch", "2", "--seq", "16", "--microbatches", "2",
            "--json")
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    num = j.get("numerics", {})
    check("run on three RTL simulators at once (a sharded stage, then a second stage): within the numerics targets",
          r.returncode == 0 and {"rtl:0", "rtl:1?preset=small", "rtl:2"} <= {o["device"] for o in j.get("ops", [])}
          and num.get("cosine", 0) >= 0.995 and num.get("top1_agreement", 0) >= 0.95, r.stderr + str(num))
    r = run("run", "--plan", "0-1@model?preset=small-bf16&precision=bf16,0-1@rtl?preset=small-bf16&precision=bf16", "--seq", "8",
            "--json")
    runs = (json.loads(r.stdout) if r.returncode == 0 else {}).get("runs", [])
    check("run in bf16 on the RTL: the model's numerics and cycles exactly, within the bf16 targets",
          len(runs) == 2 and runs[0]["numerics"] == runs[1]["numerics"]
          and runs[0]["totals"]["cycles"] == runs[1]["totals"]["cycles"] > 0
          and runs[1]["numerics"]["cosine"] >= 0.9999 and runs[1]["numerics"]["top1_agreement"] == 1.0,
          r.stderr + r.stdout[-600:])
    r = run("run")
    check("run with no arguments: the tiny model on the RTL against fp32 on the CPU", r.returncode == 0
          and "rtl:0" in r.stdout and "top-1 agreement" in r.stdout, r.stdout[-600:] + r.stderr)

# scripts/bench-gpu --quick, the GPU baseline's checks: where there is no GPU, every GPU row is
# projected and each is named as a failure, while the numerics hold; with a GPU, it passes.
devices = json.loads(run("devices", "--json").stdout)["devices"]
has_gpu = any(d["kind"] == "cuda" and d["available"] for d in devices)
r = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench-gpu"), "--quick", "--tessera", TESSERA],
                   capture_output=True, text=True, timeout=600)
if has_gpu:
    check("bench-gpu --quick passes on the GPU", r.returncode == 0, r.stdout[-2000:] + r.stderr)
else:
    check("bench-gpu --quick without a GPU: fails, naming each projected row (2 batches x 3 precisions x pp and tg)",
          r.returncode == 1 and r.stdout.count("is projected, not measured") == 12
          and "no usable GPU" in r.stdout and r.stdout.count("ok   numerics kjv-tiny") == 3, r.stdout[-2000:] + r.stderr)
finish()
