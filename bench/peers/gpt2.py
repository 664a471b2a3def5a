"""GPT-2 on Samba beside its peers (issue 12's benchmarks): a training step
and greedy token generation with the key/value cache, on the same
transformers.GPT2LMHeadModel (random init from GPT2Config, seed 0).

  gpt2_train_b8_s128   one AdamW step (forward, backward, update) of the LM
                       loss on a fixed batch of 8 sequences of 128 tokens
  gpt2_generate_b1/b8  greedy generation of GEN_NEW tokens after a prompt of
                       GEN_PROMPT tokens, batch 1 and 8; reported as new
                       tokens per second (batch x GEN_NEW over the time of
                       the prompt and every token step)

Peers (THREADS threads each, one process per peer and workload):
  samba  the model converted with from_torch_model_; training: compile with
         samba.optim.AdamW, session.run per step; generation: the two-graph
         PEF of examples/python/gpt2_generate.py (prompt graph, token graph,
         cache in device memory)
  torch  PyTorch eager: torch.optim.AdamW; generation: the model's forward
         with past_key_values under inference_mode, argmax per step
  jax    training only: the same GPT-2 written in JAX (weights copied from the
         torch model), loss, gradient and the AdamW update in one jitted
         function with donated state
  ort    generation only: the decoder with past inputs exported by
         torch.onnx.export (argmax in the graph), run in ONNX Runtime

Dropout is off (every pdrop 0) so that every peer computes the same function.
GPT2_LAYERS in the environment shrinks the model for quick runs (default 12:
GPT-2 small, hidden 768, 12 heads, vocabulary 50257).

    python gpt2.py --profile DIR   Samba's kernels by time per workload
"""

import json
import os
import re
import sys
import tempfile
import time

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TRAIN_BATCH, TRAIN_SEQ = 8, 128
GEN_PROMPT, GEN_NEW = 16, 64
GEN_BATCHES = (1, 8)
ADAMW = {"lr": 1e-4, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}


def layers():
    return int(os.environ.get("GPT2_LAYERS", "12"))


def workloads():
    out = [{"key": "gpt2_train_b%d_s%d" % (TRAIN_BATCH, TRAIN_SEQ), "model": "gpt2", "kind": "train",
            "batch": TRAIN_BATCH, "seq": TRAIN_SEQ, "peers": ("samba", "torch", "jax")}]
    for b in GEN_BATCHES:
        out.append({"key": "gpt2_generate_b%d" % b, "model": "gpt2", "kind": "generate", "batch": b,
                    "seq": GEN_PROMPT + GEN_NEW, "peers": ("samba", "torch", "ort")})
    return out


def label(w):
    n = layers()
    if w["kind"] == "train":
        return "GPT-2 %dL training step b%d s%d" % (n, w["batch"], w["seq"])
    return "GPT-2 %dL generation b%d (%d+%d tokens)" % (n, w["batch"], GEN_PROMPT, GEN_NEW)


def gpt2_model():
    import transformers
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=layers(), resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(config)


def token_batch(batch, length, vocab, seed=7):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, vocab, (batch, length)).astype(np.int64))


def timed(fn, repeats, warmup):
    """Median wall and CPU seconds (every thread of the process) of one call
    after warm-up: a call here is long (tens of milliseconds to seconds), so
    each is timed on its own. On a shared machine the CPU time is the figure
    other users' load disturbs less."""
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        last = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {"wall": float(np.median(wall)), "cpu": float(np.median(cpu)), "last": last}


# ---- training ------------------------------------------------------------------

def lm_loss(model, ids):
    return model(ids, labels=ids, use_cache=False).loss


def train_torch(lm, ids):
    lm.train()
    opt = torch.optim.AdamW(lm.parameters(), **ADAMW)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = lm_loss(lm, ids)
        loss.backward()
        opt.step()
        return loss
    return step


class Forward(torch.nn.Module):
    """The loss as a module, so the session can trace it."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return lm_loss(self.model, ids)


def samba_module():
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import sambaflow.samba as samba
    return samba


def train_samba(lm, ids, pef_dir, threads):
    samba = samba_module()
    lm.train()
    samba.from_torch_model_(lm)
    traced = Forward(lm)
    xs = [samba.from_torch_tensor(ids, name="input_ids", batch_dim=0)]
    optim = samba.optim.AdamW(traced.parameters(), **ADAMW)
    session = samba.SambaSession(num_threads=threads)
    pef = session.compile(traced, xs, optim, name="gpt2_train", pef_path=os.path.join(pef_dir, "gpt2_train.pef"))
    outs = session.trace_graph(traced, xs, optim, pef_path=pef)
    return (lambda: session.run(xs, outs)), session


def jax_gpt2_loss(n_layer, n_head):
    """GPT2LMHeadModel's forward and LM loss in JAX, on its named parameters
    (Conv1D weights are (in, out); lm_head is tied to wte)."""
    import jax
    import jax.numpy as jnp

    def layer_norm(h, p, name):
        mean = h.mean(-1, keepdims=True)
        var = ((h - mean) ** 2).mean(-1, keepdims=True)
        return (h - mean) * jax.lax.rsqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"]

    def conv1d(h, p, name):
        return h @ p[name + ".weight"] + p[name + ".bias"]

    def loss(p, ids):
        b, t = ids.shape
        h = p["transformer.wte.weight"][ids] + p["transformer.wpe.weight"][:t]
        c = h.shape[-1]
        d = c // n_head
        causal = jnp.tril(jnp.ones((t, t), bool))
        for i in range(n_layer):
            pre = "transformer.h.%d." % i
            qkv = conv1d(layer_norm(h, p, pre + "ln_1"), p, pre + "attn.c_attn")
            q, k, v = (x.reshape(b, t, n_head, d).transpose(0, 2, 1, 3) for x in jnp.split(qkv, 3, axis=-1))
            s = jnp.where(causal, q @ k.swapaxes(-1, -2) / (d ** 0.5), jnp.finfo(jnp.float32).min)
            a = (jax.nn.softmax(s, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(b, t, c)
            h = h + conv1d(a, p, pre + "attn.c_proj")
            m = jax.nn.gelu(conv1d(layer_norm(h, p, pre + "ln_2"), p, pre + "mlp.c_fc"), approximate=True)
            h = h + conv1d(m, p, pre + "mlp.c_proj")
        logits = layer_norm(h, p, "transformer.ln_f") @ p["transformer.wte.weight"].T
        logp = jax.nn.log_softmax(logits[:, :-1], axis=-1)
        return -jnp.take_along_axis(logp, ids[:, 1:, None], axis=-1).mean()
    return loss


def train_jax(lm, ids):
    import jax
    import jax.numpy as jnp
    cfg = lm.config
    params = {n: jnp.asarray(p.detach().numpy()) for n, p in lm.named_parameters()}
    loss_fn = jax_gpt2_loss(cfg.n_layer, cfg.n_head)
    lr, (b1, b2), eps, wd = ADAMW["lr"], ADAMW["betas"], ADAMW["eps"], ADAMW["weight_decay"]

    # torch.optim.AdamW: decoupled decay, bias-corrected moments.
    def train_step(p, m, v, count, x):
        loss, g = jax.value_and_grad(loss_fn)(p, x)
        count = count + 1
        m = jax.tree_util.tree_map(lambda mi, gi: b1 * mi + (1 - b1) * gi, m, g)
        v = jax.tree_util.tree_map(lambda vi, gi: b2 * vi + (1 - b2) * gi * gi, v, g)
        c1, c2 = 1 - b1 ** count, 1 - b2 ** count
        p = jax.tree_util.tree_map(
            lambda pi, mi, vi: pi * (1 - lr * wd) - lr * (mi / c1) / (jnp.sqrt(vi / c2) + eps), p, m, v)
        return p, m, v, count, loss

    step = jax.jit(train_step, donate_argnums=(0, 1, 2))
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    state = {"s": (params, zeros, jax.tree_util.tree_map(jnp.zeros_like, params), jnp.float32(0))}
    x = jnp.asarray(ids.numpy())

    def run():
        *s, loss = step(*state["s"], x)
        state["s"] = tuple(s)
        return loss.block_until_ready()
    return run


# ---- generation ------------------------------------------------------------------

def generate_torch(lm, prompt):
    lm.eval()

    def run():
        with torch.inference_mode():
            out = lm(prompt, use_cache=True)
            token = out.logits[:, -1:].argmax(-1)
            for _ in range(GEN_NEW - 1):
                out = lm(token, past_key_values=out.past_key_values, use_cache=True)
                token = out.logits[:, -1:].argmax(-1)
        return token
    return run


def generate_samba(lm, prompt, pef_dir, threads):
    samba_module()
    sys.path.insert(0, os.path.join(ROOT, "examples", "python"))
    import gpt2_generate
    batch, length = prompt.shape
    gen = gpt2_generate.SambaGenerator(lm.eval(), batch, length, length + GEN_NEW,
                                       os.path.join(pef_dir, "gpt2_generate.pef"), num_threads=threads)

    def run():
        # No end-of-text stop: every peer runs GEN_NEW steps.
        token = gen.start(prompt)
        for position in range(length, length + GEN_NEW - 1):
            token = gen.step(token, position)
        return token
    return run, gen.session


class DecoderStep(torch.nn.Module):
    """One decoder call with past keys and values as flat inputs: the next
    tokens (argmax) and the new past."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, ids, *past):
        pairs = tuple((past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2))
        out = self.lm(ids, past_key_values=pairs, use_cache=True)
        flat = [t for pair in out.past_key_values for t in pair]
        return (out.logits[:, -1:].argmax(-1),) + tuple(flat)


def generate_ort(lm, prompt, threads):
    import onnxruntime as ort
    lm.eval()
    cfg = lm.config
    batch = prompt.shape[0]
    head_dim = cfg.n_embd // cfg.n_head
    names = [f"past_{kv}_{i}" for i in range(cfg.n_layer) for kv in ("key", "value")]
    presents = [f"present_{kv}_{i}" for i in range(cfg.n_layer) for kv in ("key", "value")]
    dummy_past = [torch.zeros(batch, cfg.n_head, 3, head_dim) for _ in names]
    axes = {"ids": {1: "new"}, **{n: {2: "past"} for n in names}, **{n: {2: "total"} for n in presents}}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "gpt2_step.onnx")
        with torch.no_grad():
            torch.onnx.export(DecoderStep(lm), (prompt[:, :2], *dummy_past), path, input_names=["ids"] + names,
                              output_names=["next"] + presents, dynamic_axes=axes, opset_version=17)
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    empty = np.zeros((batch, cfg.n_head, 0, head_dim), np.float32)
    ids = prompt.numpy()

    def run():
        out = sess.run(None, {"ids": ids, **{n: empty for n in names}})
        for _ in range(GEN_NEW - 1):
            out = sess.run(None, {"ids": out[0], **dict(zip(names, out[1:]))})
        return out[0]
    return run


# ---- one peer on one workload ------------------------------------------------------

def step_function(peer, w, pef_dir, threads):
    """The function one step calls, and the Samba session when the peer is Samba."""
    lm = gpt2_model()
    vocab = lm.config.vocab_size
    if w["kind"] == "train":
        ids = token_batch(w["batch"], w["seq"], vocab)
        if peer == "samba":
            return train_samba(lm, ids, pef_dir, threads)
        return {"torch": lambda: train_torch(lm, ids), "jax": lambda: train_jax(lm, ids)}[peer](), None
    prompt = token_batch(w["batch"], GEN_PROMPT, vocab)
    if peer == "samba":
        return generate_samba(lm, prompt, pef_dir, threads)
    return {"torch": lambda: generate_torch(lm, prompt), "ort": lambda: generate_ort(lm, prompt, threads)}[peer](), None


def time_peer(peer, key, threads):
    """Wall and CPU seconds per training step, or per whole generation, and
    what the last call computed ("check": the loss of the last training step,
    or the last generated tokens), which must agree between peers."""
    w = next(w for w in workloads() if w["key"] == key)
    with tempfile.TemporaryDirectory() as d:
        fn, _ = step_function(peer, w, d, threads)
        t = timed(fn, repeats=3, warmup=1)
    last = t.pop("last")
    last = last[0] if isinstance(last, (list, tuple)) else last  # Samba's run returns its outputs
    last = last.detach() if isinstance(last, torch.Tensor) else last
    last = last.numpy() if hasattr(last, "numpy") else np.asarray(last)
    t["check"] = float(last) if w["kind"] == "train" else last.ravel().tolist()
    return t


def kernel_profile(out_dir, threads, steps=2):
    """Samba's kernels by time for each GPT-2 workload, from the Samba
    profile (Chrome trace JSON, also written for Perfetto): the time per step
    of each op kind (a kernel name without its _N suffixes). A kernel's event
    spans its whole parallel run; kernels that run at once overlap, so their
    sum can exceed the step."""
    samba = samba_module()
    os.makedirs(out_dir, exist_ok=True)
    report = {}
    for w in workloads():
        with tempfile.TemporaryDirectory() as d:
            fn, session = step_function("samba", w, d, threads)
            fn()  # first touch of the activations' pages
            trace = os.path.join(out_dir, "%s.trace.json" % w["key"])
            t0 = time.perf_counter()
            with session.samba_profile(trace):
                for _ in range(steps):
                    fn()
            step_s = (time.perf_counter() - t0) / steps
        with open(trace) as f:
            events = json.load(f)
        events = events["traceEvents"] if isinstance(events, dict) else events
        by_kind, by_cat = {}, {}
        for e in events:
            if e.get("ph") != "X":
                continue
            by_cat[e.get("cat", "")] = by_cat.get(e.get("cat", ""), 0.0) + e["dur"] * 1e-6 / steps
            if e.get("cat") != "kernel":
                continue
            kind = re.sub(r"_[0-9]+", "", e["name"])  # linear_12 and linear_40 are one kind
            by_kind[kind] = by_kind.get(kind, 0.0) + e["dur"] * 1e-6 / steps
        top = sorted(by_kind.items(), key=lambda kv: -kv[1])
        report[w["key"]] = {"step_s": step_s, "categories_s": by_cat, "kernels_s": dict(top), "trace": trace}
        print("%s: step %.1f ms; kernels %.1f ms (summed; concurrent kernels overlap)" % (
            w["key"], step_s * 1e3, by_cat.get("kernel", 0.0) * 1e3))
        for kind, s in top[:10]:
            print("  %-32s %9.2f ms  %5.1f%% of step" % (kind, s * 1e3, 100 * s / step_s))
    with open(os.path.join(out_dir, "gpt2_kernels.json"), "w") as f:
        json.dump(report, f, indent=1)
    return report


# ---- the table -----------------------------------------------------------------

PEER_NAMES = (("samba", "Samba"), ("torch", "PyTorch eager"), ("jax", "JAX jit"), ("ort", "ONNX Runtime"))
GOALS = {"train": {"torch": 2.0, "jax": 1.0}, "generate": {"torch": 1.5}}


def figure(w, seconds):
    """A training step's milliseconds, or generation's new tokens per second."""
    if seconds is None:
        return None
    return seconds * 1e3 if w["kind"] == "train" else w["batch"] * GEN_NEW / seconds


def speedup(w, peer, clock=""):
    """How many times faster Samba is than `peer` (above 1: Samba is faster),
    in wall time, or in CPU time with clock="cpu_"."""
    s, p = w.get("samba_%ss" % clock), w.get("%s_%ss" % (peer, clock))
    return None if s is None or p is None else p / s


def summary_line(w):
    unit = "ms/step" if w["kind"] == "train" else "tokens/s"
    parts = ["%s %s" % (name, "-" if w.get(k + "_s") is None else "%.1f" % figure(w, w[k + "_s"]))
             for k, name in PEER_NAMES if k in w["peers"]]
    return "%-22s %s (%s)" % (w["key"], "  ".join(parts), unit)


def markdown(rows, threads, versions, load):
    head = ("| Workload | Unit | Samba | PyTorch eager | JAX jit | ONNX Runtime | Samba vs PyTorch | Samba vs JAX "
            "| Samba vs ORT | Goal |")
    lines = [head, "|" + "---|" * 10]
    for w in rows:
        cells = [label(w), "ms per step" if w["kind"] == "train" else "new tokens/s"]
        for k, _ in PEER_NAMES:
            f = figure(w, w.get(k + "_s")) if k in w["peers"] else None
            cells.append("-" if f is None else "%.1f" % f)
        for k in ("torch", "jax", "ort"):
            x = speedup(w, k) if k in w["peers"] else None
            cpu = speedup(w, k, "cpu_") if k in w["peers"] else None
            cells.append("-" if x is None else "%.2fx" % x + ("" if cpu is None else " (CPU time %.2fx)" % cpu))
        goals = []
        for k, want in GOALS[w["kind"]].items():
            x = speedup(w, k)
            verdict = "?" if x is None else ("met" if x >= want else "missed")
            goals.append(">= %.1fx %s: %s" % (want, dict(PEER_NAMES)[k], verdict))
        cells.append("; ".join(goals))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for w in rows:
        checks = ", ".join("%s %s" % (name, "%.6f" % w[k + "_check"] if w["kind"] == "train" else w[k + "_check"])
                           for k, name in PEER_NAMES if w.get(k + "_check") is not None)
        lines.append("%s, %s: %s." % (label(w), "loss after the last timed step" if w["kind"] == "train"
                                       else "last tokens", checks))
    lines.append("")
    lines.append("Samba vs X: X's wall time over Samba's (above 1: Samba is faster), and the same of the CPU time "
                 "of all the process's threads. %d threads per peer; "
                 "load average %s at the end (before each workload: %s). Peers: %s." % (
                     threads, load, ", ".join("%s %s" % (w["key"], w.get("load_before", "?")) for w in rows),
                     ", ".join("%s %s" % kv for kv in versions.items())))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--profile":
        torch.set_num_threads(2)
        kernel_profile(sys.argv[2], threads=2)
    else:
        print(__doc__)
        sys.exit(2)
