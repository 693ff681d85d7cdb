#!/usr/bin/env python3
"""Reference forward pass and greedy decoding for Llama / Qwen2 / Qwen3 causal LMs.

Test oracle for the TypeScript inference engine: the expected output of Hugging Face
Transformers' LlamaForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM (eager attention,
no sampling). It was written from the equations in Transformers' modeling_llama.py,
modeling_qwen2.py, modeling_qwen3.py, modeling_rope_utils.py and the config classes'
defaults; it uses no Transformers code. Only the standard library and numpy are needed.
Everything is computed in float64 once the weights are loaded, whatever the
checkpoint's dtype, so it gives the "exact" values that an implementation computing
in float32/bf16 should come close to.

Usage:
  python3 hf_reference.py DIR --prompt-ids 1,2,3 --max-new-tokens N
      -> {"ids": [...new ids...], "logprobs": [...]}   (greedy, one JSON line)
  python3 hf_reference.py DIR --prompt-ids 1,2,3 --logits
      -> {"lastLogprobs": [V floats]}   (log_softmax of the last position's logits)

DIR holds config.json, model.safetensors or model.safetensors.index.json (+ shards),
and optionally generation_config.json. Exit status 2 on an unsupported or bad input.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

# Defaults of Transformers' config classes, used when config.json lacks a key.
# (LlamaConfig: num_key_value_heads=None -> num_attention_heads, head_dim=None ->
# hidden/heads. Qwen2Config/Qwen3Config: num_key_value_heads=32; Qwen3: head_dim=128.)
ARCHS = {
    "LlamaForCausalLM": dict(kv_heads=None, head_dim=None, qkv_bias=None, qk_norm=False),
    "Qwen2ForCausalLM": dict(kv_heads=32, head_dim=None, qkv_bias=True, qk_norm=False),
    "Qwen3ForCausalLM": dict(kv_heads=32, head_dim=128, qkv_bias=None, qk_norm=True),
}
DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "BF16": "<u2"}


def fail(msg):
    sys.stderr.write(f"hf_reference: {msg}\n")
    sys.exit(2)


# ---------------------------------------------------------------- safetensors
def read_safetensors(path):
    """Parse a .safetensors file: u64 LE header size, JSON header, raw data."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in DTYPES:
            fail(f"{name}: unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        dt = np.dtype(DTYPES[info["dtype"]])
        arr = np.frombuffer(blob, dtype=dt, count=(end - begin) // dt.itemsize, offset=base + begin)
        if info["dtype"] == "BF16":  # bf16 = upper 16 bits of an f32
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[name] = arr.astype(np.float64).reshape(info["shape"])
    return out


def load_weights(d):
    index = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    weights = {}
    for name in files:
        weights.update(read_safetensors(os.path.join(d, name)))
    # Checkpoints of the bare base model have no "model." prefix; Transformers accepts both.
    return {(k if k.startswith(("model.", "lm_head.")) else "model." + k): v for k, v in weights.items()}


# ---------------------------------------------------------------- config
def load_config(d):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    arch = (cfg.get("architectures") or [None])[0]
    if arch not in ARCHS:
        fail(f"unsupported architecture {arch!r}")
    a = ARCHS[arch]
    c = dict(arch=arch, qk_norm=a["qk_norm"])
    c["hidden"] = cfg["hidden_size"]
    c["layers"] = cfg["num_hidden_layers"]
    c["heads"] = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads", a["kv_heads"])
    c["kv_heads"] = kv if kv is not None else c["heads"]
    hd = cfg.get("head_dim", a["head_dim"])
    c["head_dim"] = hd if hd else c["hidden"] // c["heads"]
    c["eps"] = cfg.get("rms_norm_eps", 1e-6)  # 1e-6 in all three config classes
    c["tie"] = cfg.get("tie_word_embeddings", False)  # False in all three config classes
    # Qwen2 hard-codes q/k/v bias=True and o_proj bias=False; Llama and Qwen3 use attention_bias.
    att_bias = cfg.get("attention_bias", False)
    c["qkv_bias"] = a["qkv_bias"] if a["qkv_bias"] is not None else att_bias
    c["o_bias"] = att_bias if arch != "Qwen2ForCausalLM" else False
    c["mlp_bias"] = cfg.get("mlp_bias", False) if arch == "LlamaForCausalLM" else False
    if cfg.get("hidden_act", "silu") != "silu":
        fail(f"unsupported hidden_act {cfg['hidden_act']!r}")
    if cfg.get("use_sliding_window", False):
        fail("use_sliding_window=true is not supported")
    if cfg.get("partial_rotary_factor", 1.0) != 1.0:
        fail("partial_rotary_factor != 1 is not supported")
    if c["heads"] % c["kv_heads"]:
        fail("num_attention_heads is not a multiple of num_key_value_heads")
    # RoPE: legacy rope_theta/rope_scaling keys, or the newer rope_parameters dict.
    rp = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    c["rope_type"] = rp.get("rope_type", rp.get("type", "default"))
    c["rope_theta"] = float(rp.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    c["rope"] = rp
    if c["rope_type"] not in ("default", "llama3"):
        fail(f"unsupported rope scaling {c['rope_type']!r}")
    # End-of-sequence ids: config.json plus generation_config.json.
    gpath = os.path.join(d, "generation_config.json")
    gen = json.load(open(gpath)) if os.path.exists(gpath) else {}
    c["eos"] = set()
    for e in (cfg.get("eos_token_id"), gen.get("eos_token_id")):
        c["eos"].update([] if e is None else e if isinstance(e, list) else [e])
    return c


def inverse_frequencies(c):
    """_compute_default_rope_parameters, then _compute_llama3_parameters if asked."""
    dim = c["head_dim"]
    inv = 1.0 / (c["rope_theta"] ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    if c["rope_type"] == "llama3":
        r = c["rope"]
        factor, low, high = r["factor"], r["low_freq_factor"], r["high_freq_factor"]
        old_ctx = r["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
        wavelen = 2 * np.pi / inv
        # long wavelengths (low frequencies) are divided by factor, short ones kept
        scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
        # in between: interpolate with a smooth factor
        smooth = (old_ctx / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        inv = np.where(medium, smoothed, scaled)
    return inv  # attention_factor is 1.0 for both rope types


# ---------------------------------------------------------------- model
class Model:
    def __init__(self, d):
        self.c = c = load_config(d)
        self.w = w = load_weights(d)
        self.inv_freq = inverse_frequencies(c)
        H, K, hd, D = c["heads"], c["kv_heads"], c["head_dim"], c["hidden"]
        self.embed = self.get("model.embed_tokens.weight")
        if c["tie"]:
            self.lm_head = self.embed
        elif "lm_head.weight" in w:
            self.lm_head = w["lm_head.weight"]
        else:
            fail("lm_head.weight missing and tie_word_embeddings is false")
        # Shapes must agree with the config (Transformers would refuse to load otherwise).
        expect = {"model.embed_tokens.weight": (self.embed.shape[0], D)}
        for i in range(c["layers"]):
            p = f"model.layers.{i}.self_attn."
            expect.update({p + "q_proj.weight": (H * hd, D), p + "k_proj.weight": (K * hd, D),
                           p + "v_proj.weight": (K * hd, D), p + "o_proj.weight": (D, H * hd)})
        for name, shape in expect.items():
            if self.get(name).shape != shape:
                fail(f"{name}: shape {self.get(name).shape}, config implies {shape}")

    def get(self, name):
        if name not in self.w:
            fail(f"missing tensor {name}")
        return self.w[name]

    def linear(self, x, prefix, bias):
        """nn.Linear: weight is [out, in]; y = x @ W.T + b."""
        y = x @ self.get(prefix + ".weight").T
        return y + self.get(prefix + ".bias") if bias else y

    def rms_norm(self, x, weight):
        var = np.mean(x * x, axis=-1, keepdims=True)
        return weight * (x / np.sqrt(var + self.c["eps"]))

    def forward(self, ids):
        """Hidden state after the final norm at the last position, for ids[0..T-1]."""
        c = self.c
        H, K, hd = c["heads"], c["kv_heads"], c["head_dim"]
        T = len(ids)
        x = self.embed[np.asarray(ids)]  # [T, D]
        freqs = np.arange(T, dtype=np.float64)[:, None] * self.inv_freq[None, :]
        emb = np.concatenate([freqs, freqs], axis=-1)  # [T, hd]
        cos, sin = np.cos(emb), np.sin(emb)
        causal = np.triu(np.full((T, T), -np.inf), k=1)  # key j > query i is masked

        def rotate_half(t):
            return np.concatenate([-t[..., hd // 2:], t[..., :hd // 2]], axis=-1)

        for i in range(c["layers"]):
            p = f"model.layers.{i}."
            h = self.rms_norm(x, self.get(p + "input_layernorm.weight"))
            q = self.linear(h, p + "self_attn.q_proj", c["qkv_bias"]).reshape(T, H, hd).transpose(1, 0, 2)
            k = self.linear(h, p + "self_attn.k_proj", c["qkv_bias"]).reshape(T, K, hd).transpose(1, 0, 2)
            v = self.linear(h, p + "self_attn.v_proj", c["qkv_bias"]).reshape(T, K, hd).transpose(1, 0, 2)
            if c["qk_norm"]:  # Qwen3: per-head RMSNorm over head_dim, before RoPE
                q = self.rms_norm(q, self.get(p + "self_attn.q_norm.weight"))
                k = self.rms_norm(k, self.get(p + "self_attn.k_norm.weight"))
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            # GQA (repeat_kv): query head h reads kv head h // (H / K)
            k = np.repeat(k, H // K, axis=0)
            v = np.repeat(v, H // K, axis=0)
            scores = q @ k.transpose(0, 2, 1) / np.sqrt(hd) + causal  # [H, T, T]
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            attn = (probs @ v).transpose(1, 0, 2).reshape(T, H * hd)
            x = x + self.linear(attn, p + "self_attn.o_proj", c["o_bias"])
            h = self.rms_norm(x, self.get(p + "post_attention_layernorm.weight"))
            gate = self.linear(h, p + "mlp.gate_proj", c["mlp_bias"])
            up = self.linear(h, p + "mlp.up_proj", c["mlp_bias"])
            silu = gate / (1.0 + np.exp(-gate))
            x = x + self.linear(silu * up, p + "mlp.down_proj", c["mlp_bias"])
        return self.rms_norm(x[-1], self.get("model.norm.weight"))

    def last_logprobs(self, ids):
        logits = self.lm_head @ self.forward(ids)  # [V]
        m = logits.max()
        return logits - m - np.log(np.sum(np.exp(logits - m)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--prompt-ids", required=True, help="comma-separated token ids")
    ap.add_argument("--max-new-tokens", type=int)
    ap.add_argument("--logits", action="store_true", help="print the last position's log-probabilities")
    args = ap.parse_args()
    try:
        ids = [int(t) for t in args.prompt_ids.split(",") if t.strip() != ""]
    except ValueError:
        fail("--prompt-ids must be comma-separated integers")
    if not ids:
        fail("--prompt-ids is empty")
    if not args.logits and (args.max_new_tokens is None or args.max_new_tokens < 0):
        fail("--max-new-tokens N (N >= 0) is required unless --logits is given")
    model = Model(args.dir)
    vocab = model.embed.shape[0]
    if any(t < 0 or t >= vocab for t in ids):
        fail(f"prompt id out of range [0, {vocab})")
    if args.logits:
        print(json.dumps({"lastLogprobs": model.last_logprobs(ids).tolist()}))
        return
    seq, logprobs = list(ids), []
    for _ in range(args.max_new_tokens):
        lp = model.last_logprobs(seq)  # whole sequence recomputed: no KV cache
        tok = int(np.argmax(lp))  # first maximum = lowest id on ties
        seq.append(tok)
        logprobs.append(float(lp[tok]))
        if tok in model.c["eos"]:  # the eos token itself is part of the output
            break
    print(json.dumps({"ids": seq[len(ids):], "logprobs": logprobs}))


if __name__ == "__main__":
    main()
