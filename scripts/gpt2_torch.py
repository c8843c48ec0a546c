"""GPT-2 in PyTorch, written from the paper's and Hugging Face's description (not from this
project's C++), for scripts/train-tiny and scripts/eval-torch: the Hugging Face tensor layout
(Conv1D weights as [in, out]), pre-LayerNorm blocks, tanh GELU, the output projection tied to the
token embedding; and the model directory it reads and writes (config.json, model.safetensors,
vocab.json, merges.txt)."""
import json
import math
import pathlib
import struct

import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width, eps=1e-5)
        self.c_attn_w = nn.Parameter(torch.empty(width, 3 * width))
        self.c_attn_b = nn.Parameter(torch.zeros(3 * width))
        self.c_proj_w = nn.Parameter(torch.empty(width, width))
        self.c_proj_b = nn.Parameter(torch.zeros(width))
        self.ln_2 = nn.LayerNorm(width, eps=1e-5)
        self.c_fc_w = nn.Parameter(torch.empty(width, 4 * width))
        self.c_fc_b = nn.Parameter(torch.zeros(4 * width))
        self.mlp_proj_w = nn.Parameter(torch.empty(4 * width, width))
        self.mlp_proj_b = nn.Parameter(torch.zeros(width))

    def forward(self, x):
        b, t, e = x.shape
        q, k, v = (self.ln_1(x) @ self.c_attn_w + self.c_attn_b).split(e, dim=2)
        q, k, v = (y.view(b, t, self.heads, e // self.heads).transpose(1, 2) for y in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(e // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
        x = x + att.transpose(1, 2).reshape(b, t, e) @ self.c_proj_w + self.c_proj_b
        h = F.gelu(self.ln_2(x) @ self.c_fc_w + self.c_fc_b, approximate="tanh")
        return x + h @ self.mlp_proj_w + self.mlp_proj_b


class GPT2(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        e = cfg["n_embd"]
        self.wte = nn.Parameter(torch.empty(cfg["vocab_size"], e))
        self.wpe = nn.Parameter(torch.empty(cfg["n_positions"], e))
        self.blocks = nn.ModuleList(Block(e, cfg["n_head"]) for _ in range(cfg["n_layer"]))
        self.ln_f = nn.LayerNorm(e, eps=1e-5)

    def init_weights(self, generator):
        """GPT-2's initialization: N(0, 0.02), the residual projections scaled by 1/sqrt(2 layers)."""
        for name, p in self.named_parameters():
            if name.endswith(("_w", "wte", "wpe")):
                std = 0.02 / math.sqrt(2 * self.cfg["n_layer"]) if name.endswith("proj_w") else 0.02
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=generator) * std)

    def forward(self, ids):
        x = self.wte[ids] + self.wpe[: ids.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return self.ln_f(x) @ self.wte.T

    # The Hugging Face names of the tensors, and back.
    def hf_tensors(self):
        out = {"wte.weight": self.wte, "wpe.weight": self.wpe, "ln_f.weight": self.ln_f.weight, "ln_f.bias": self.ln_f.bias}
        for i, b in enumerate(self.blocks):
            for hf, p in [("ln_1.weight", b.ln_1.weight), ("ln_1.bias", b.ln_1.bias),
                          ("attn.c_attn.weight", b.c_attn_w), ("attn.c_attn.bias", b.c_attn_b),
                          ("attn.c_proj.weight", b.c_proj_w), ("attn.c_proj.bias", b.c_proj_b),
                          ("ln_2.weight", b.ln_2.weight), ("ln_2.bias", b.ln_2.bias),
                          ("mlp.c_fc.weight", b.c_fc_w), ("mlp.c_fc.bias", b.c_fc_b),
                          ("mlp.c_proj.weight", b.mlp_proj_w), ("mlp.c_proj.bias", b.mlp_proj_b)]:
                out[f"h.{i}.{hf}"] = p
        return out


DTYPES = {"F32": (torch.float32, 4), "F16": (torch.float16, 2)}


def save(model, directory, dtype="F16"):
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps({**model.cfg, "model_type": "gpt2",
                                                       "activation_function": "gelu_new"}, indent=2) + "\n")
    torch_dtype, size = DTYPES[dtype]
    header, blobs, at = {}, [], 0
    for name, p in model.hf_tensors().items():
        raw = p.detach().to(torch_dtype).contiguous().numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(p.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    (directory / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def load(directory):
    directory = pathlib.Path(directory)
    cfg = json.loads((directory / "config.json").read_text())
    cfg = {k: cfg[k] for k in ("n_embd", "n_head", "n_layer", "n_positions", "vocab_size")}
    model = GPT2(cfg)
    data = (directory / "model.safetensors").read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    tensors = model.hf_tensors()
    with torch.no_grad():
        for name, info in header.items():
            if name == "__metadata__":
                continue
            torch_dtype, _ = DTYPES[info["dtype"]]
            a, b = info["data_offsets"]
            t = torch.frombuffer(bytearray(body[a:b]), dtype=torch_dtype).reshape(info["shape"])
            tensors[name].copy_(t.to(torch.float32))
    return model


def byte_tokenizer(directory, gpt2_encoder_json):
    """A byte-level vocabulary: GPT-2's first 256 tokens (one per byte) and no merges."""
    directory = pathlib.Path(directory)
    enc = json.loads(pathlib.Path(gpt2_encoder_json).read_text())
    (directory / "vocab.json").write_text(json.dumps({t: i for t, i in enc.items() if i < 256}, ensure_ascii=False))
    (directory / "merges.txt").write_text("#version: 0.2\n")


def byte_ids(text):
    """The byte-level tokenizer's ids of a text: its UTF-8 bytes (GPT-2's first 256 ids are the bytes
    in its printable stand-in order, so the id of a byte is its rank in that order)."""
    order = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    order += [b for b in range(256) if b not in order]
    rank = {b: i for i, b in enumerate(order)}
    return [rank[b] for b in text.encode("utf-8")]
