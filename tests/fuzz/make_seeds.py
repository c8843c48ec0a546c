#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz harnesses (tests/fuzz/corpus/NAME/): small valid inputs of
every kind each parser reads, from which the fuzzers mutate. Rerun after changing a format:
    tests/fuzz/make_seeds.py
"""
import json
import pathlib
import shutil
import struct

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE / "corpus"


def safetensors(tensors, metadata=None, prefix=""):
    """tensors: [(name, dtype, shape, raw bytes)]; returns the file's bytes."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[prefix + name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def floats(n, fmt="f", start=0.0):
    return struct.pack(f"<{n}{fmt}", *[start + 0.01 * i for i in range(n)])


def halfs(n):
    return struct.pack(f"<{n}e", *[0.01 * i for i in range(n)])


def bf16(n):
    return b"".join(struct.pack("<f", 0.01 * i)[2:] for i in range(n))


def tiny_model(dtype="F32", prefix=""):
    E, H, L, V, P = 4, 2, 1, 8, 4
    enc = {"F32": lambda n: floats(n), "F16": halfs, "BF16": bf16}[dtype]
    t = [("wte.weight", [V, E]), ("wpe.weight", [P, E])]
    for i in range(L):
        h = f"h.{i}."
        t += [(h + "ln_1.weight", [E]), (h + "ln_1.bias", [E]),
              (h + "attn.c_attn.weight", [E, 3 * E]), (h + "attn.c_attn.bias", [3 * E]),
              (h + "attn.c_proj.weight", [E, E]), (h + "attn.c_proj.bias", [E]),
              (h + "ln_2.weight", [E]), (h + "ln_2.bias", [E]),
              (h + "mlp.c_fc.weight", [E, 4 * E]), (h + "mlp.c_fc.bias", [4 * E]),
              (h + "mlp.c_proj.weight", [4 * E, E]), (h + "mlp.c_proj.bias", [E])]
    t += [("ln_f.weight", [E]), ("ln_f.bias", [E])]
    tensors = []
    for name, shape in t:
        n = 1
        for d in shape:
            n *= d
        tensors.append((name, dtype, shape, enc(n)))
    config = {"model_type": "gpt2", "n_embd": E, "n_head": H, "n_layer": L, "n_positions": P, "vocab_size": V,
              "layer_norm_epsilon": 1e-5}
    return json.dumps(config).encode(), safetensors(tensors, {"format": "pt"}, prefix)


def write(name, items):
    d = CORPUS / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    for fname, data in items.items():
        (d / fname).write_bytes(data if isinstance(data, bytes) else data.encode())


def main():
    write("safetensors", {
        "all_dtypes": safetensors([
            ("f32", "F32", [2, 3], floats(6)), ("f16", "F16", [3], halfs(3)), ("bf16", "BF16", [2], bf16(2)),
            ("f64", "F64", [2], floats(2, "d")), ("i8", "I8", [4], bytes([1, 2, 255, 128])),
            ("empty", "F32", [0, 5], b""), ("scalar", "F32", [], floats(1)),
        ], {"format": "pt", "note": "seed"}),
        "empty_header": safetensors([]),
        "tiny_model_bf16": tiny_model("BF16")[1],
    })
    gpt2_small = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
                  "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
                  "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
                  "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "vocab_size": 50257}
    write("config", {
        "gpt2_small.json": json.dumps(gpt2_small, indent=2),
        "tiny.json": tiny_model()[0],
        "n_ctx_only.json": '{"n_embd": 64, "n_head": 4, "n_layer": 2, "n_ctx": 128, "vocab_size": 100}',
    })
    items = {}
    for dtype, prefix in [("F32", ""), ("F16", "transformer."), ("BF16", "")]:
        cfg, st = tiny_model(dtype, prefix)
        items[f"tiny_{dtype.lower()}{'_prefixed' if prefix else ''}"] = cfg + b"\0" + st
    write("model_dir", items)
    plans = ["0-5@rtl:0+rtl:1;6-11@cuda:0", "0-11@rtl:0*1+cuda:0*3", "0-11@cuda:0?precision=int8",
             "0-5@r0:rtl:0+r1:rtl:0;6-11@r2:cuda:0", "0-1@cpu", "0@model?preset=small;1@model:1*2.5+cpu*0.5",
             "0-1@cuda:1?gpu=h200&projected=1", "0-11@xdma:/dev/xdma0"]
    write("plan", {f"plan{i}": bytes([i * 37 % 256]) + p.encode() for i, p in enumerate(plans)})
    specs = ["model", "rtl:1?preset=small&mem_latency=120&fault=stuck:3,1,7", "xdma:/dev/xdma0",
             "model?fault=flip:1e-5&seed=3", "rtl?fault=slverr:0x8040&scoreboard=0",
             "model:2?mem_mb=64&completion=poll&mem_bytes_per_cycle=32", "model?fault=hang",
             "rtl?trace=a.fst&preset=large"]
    write("device_spec", {f"spec{i}": s for i, s in enumerate(specs)})
    traces = HERE.parent / "traces"
    items = {}
    # trace.json, NUL, a mode byte (bit 0: the harness recomputes the CRCs), data.bin
    trace = json.loads((traces / "edge_1x1x1" / "trace.json").read_text())
    data = (traces / "edge_1x1x1" / "data.bin").read_bytes()
    text = (traces / "edge_1x1x1" / "trace.json").read_bytes()
    for mode in (0, 1):
        items[f"edge_1x1x1_mode{mode}"] = text + b"\0" + bytes([mode]) + data
    compact = json.dumps(trace, separators=(",", ":")).encode()
    items["edge_1x1x1_compact"] = compact + b"\0\1" + data
    # Blobs that end exactly at the end of the harness's 1 MiB device: one digit from outside it.
    for e in trace["events"]:
        for kind in ("load", "check"):
            if kind in e:
                e[kind]["addr"] = (1 << 20) - e[kind]["size"]
    items["blobs_at_memory_end"] = json.dumps(trace, separators=(",", ":")).encode() + b"\0\1" + data
    write("replay", items)
    reference = (HERE.parent / "tokenizer" / "reference.jsonl").read_text().splitlines()
    texts = [json.loads(line)["text"] for line in reference[::25]]
    texts += ["I'm here, they've gone", "\t  \n\n x", "😀👨‍👩‍👧 e\u0301"]
    items = {f"text{i}": t.encode() for i, t in enumerate(texts)}
    items["invalid_utf8"] = b"ok \xff\xfe \xc3( \xe2\x82 end"
    write("tokenizer", items)


if __name__ == "__main__":
    main()
