"""The peers of the end-to-end benchmarks, timed on the same models and
shapes as bench/e2e_bench.cpp, and the table that sets Samba beside them.

    python peers.py --samba E2E.json --machine MACHINE.json --out DIR [--no-gpt2]
    python peers.py --gpt2-only --out DIR

Models (bench/e2e_models.h builds the same ones):
  resffn   ResFFNLogReg, 784 features, 10 classes: gemm1, layer_norm, tanh,
           gemm2, layer_norm, residual add, sigmoid, gemm3, cross-entropy
  convnet  8x8 single-channel images: conv 1->16 and 16->32 (3x3, pad 1),
           relu after each, 2x2 max pooling, linear 512->10, cross-entropy
Training is one step of SGD with momentum 0.9 (lr 0.01) on a fixed batch;
inference returns the logits of a batch. GPT-2 (bench/peers/gpt2.py: a
training step with AdamW, and token generation with the key/value cache)
is timed for Samba here too, from the Python front end, one process per
peer; --gpt2-only runs only it, --no-gpt2 leaves it out.

Peers, each with 2 threads, timed after warm-up, median of repeats, each
peer and workload in a process of its own:
  torch    PyTorch eager (training step and inference under inference_mode)
  jax      JAX with the whole training step (value_and_grad and the
           momentum update) in one jitted function, and jitted inference
  ort      ONNX Runtime, inference of the model exported by torch.onnx.export

Writes DIR/peers.json (every figure and the versions), DIR/peers.md (the
table for docs/PERFORMANCE.md) and, when matplotlib is there,
DIR/growth.png (time per step against batch x hidden).
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

THREADS = 2
# XLA reads its flags when jax is imported: set them first.
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads=%d" % THREADS)

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2  # noqa: E402

FEATURES, CLASSES = 784, 10
RESFFN_SIZES = [(16, 256), (256, 1024), (1024, 2048)]
CONVNET_BATCH = 256
LR, MOMENTUM = 0.01, 0.9


def workloads():
    out = []
    for b, h in RESFFN_SIZES:
        for kind in ("train", "infer"):
            out.append({"key": "resffn_%s_b%d_h%d" % (kind, b, h), "model": "resffn", "kind": kind,
                        "batch": b, "hidden": h})
    for kind in ("train", "infer"):
        out.append({"key": "convnet_%s_b%d" % (kind, CONVNET_BATCH), "model": "convnet", "kind": kind,
                    "batch": CONVNET_BATCH, "hidden": 0})
    return out


def contraction_flops(w):
    """2 m n k per GEMM or implicit-GEMM convolution, as e2e_models.h counts."""
    b, h = w["batch"], w["hidden"]
    if w["model"] == "resffn":
        fwd = 2.0 * b * (FEATURES * h + h * h + h * CLASSES)
        bwd = 2.0 * b * (FEATURES * h + 2 * h * h + 2 * h * CLASSES)
    else:
        pixels, taps, flat = b * 64, 9, 512
        fwd = 2.0 * pixels * (16 * taps + 32 * 16 * taps) + 2.0 * b * flat * CLASSES
        bwd = 2.0 * pixels * (16 * taps + 2 * 32 * 16 * taps) + 4.0 * b * flat * CLASSES
    return fwd + (bwd if w["kind"] == "train" else 0.0)


def median_time(fn, min_repeat_s=0.2, repeats=7, warmup=5):
    """Median over `repeats` of the mean time of one call, each repeat long
    enough (min_repeat_s) for the clock to be negligible."""
    for _ in range(warmup):
        fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-6)
    n = max(1, int(min_repeat_s / one))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


def inputs(w, seed=7):
    rng = np.random.default_rng(seed)
    b = w["batch"]
    shape = (b, FEATURES) if w["model"] == "resffn" else (b, 1, 8, 8)
    x = rng.uniform(-1, 1, size=shape).astype(np.float32)
    y = (np.arange(b) * 7 % CLASSES).astype(np.int64)
    return x, y


# ---- PyTorch -----------------------------------------------------------------

class ResFFN(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.gemm1 = torch.nn.Linear(FEATURES, hidden)
        self.norm1 = torch.nn.LayerNorm(hidden)
        self.gemm2 = torch.nn.Linear(hidden, hidden)
        self.norm2 = torch.nn.LayerNorm(hidden)
        self.gemm3 = torch.nn.Linear(hidden, CLASSES)

    def forward(self, x):
        res = torch.tanh(self.norm1(self.gemm1(x)))
        out = torch.sigmoid(self.norm2(self.gemm2(res)) + res)
        return self.gemm3(out)


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.fc = torch.nn.Linear(512, CLASSES)

    def forward(self, x):
        h = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc(torch.flatten(torch.nn.functional.max_pool2d(h, 2), 1))


def torch_model(w):
    torch.manual_seed(0)
    return ResFFN(w["hidden"]) if w["model"] == "resffn" else ConvNet()


def time_torch(w):
    model = torch_model(w)
    x, y = (torch.from_numpy(a) for a in inputs(w))
    if w["kind"] == "infer":
        model.eval()

        def infer():
            with torch.inference_mode():
                model(x)
        return median_time(infer)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    return median_time(step)


# ---- JAX ---------------------------------------------------------------------

def jax_params(w):
    """The torch model's initial weights, as a dict of jax arrays."""
    import jax.numpy as jnp
    return {k: jnp.asarray(v.detach().numpy()) for k, v in torch_model(w).state_dict().items()}


def jax_forward(w):
    import jax
    import jax.numpy as jnp

    def layer_norm(h, g, b):
        mean = h.mean(-1, keepdims=True)
        var = ((h - mean) ** 2).mean(-1, keepdims=True)
        return (h - mean) * jax.lax.rsqrt(var + 1e-5) * g + b

    def linear(h, p, name):
        return h @ p[name + ".weight"].T + p[name + ".bias"]

    def conv(h, p, name):
        out = jax.lax.conv_general_dilated(h, p[name + ".weight"], (1, 1), ((1, 1), (1, 1)),
                                           dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return out + p[name + ".bias"][None, :, None, None]

    if w["model"] == "resffn":
        def forward(p, x):
            res = jnp.tanh(layer_norm(linear(x, p, "gemm1"), p["norm1.weight"], p["norm1.bias"]))
            out = jax.nn.sigmoid(layer_norm(linear(res, p, "gemm2"), p["norm2.weight"], p["norm2.bias"]) + res)
            return linear(out, p, "gemm3")
    else:
        def forward(p, x):
            h = jax.nn.relu(conv(jax.nn.relu(conv(x, p, "conv1")), p, "conv2"))
            h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
            return linear(h.reshape(h.shape[0], -1), p, "fc")
    return forward


def time_jax(w):
    import jax
    import jax.numpy as jnp
    forward = jax_forward(w)
    params = jax_params(w)
    x_np, y_np = inputs(w)
    x, y = jnp.asarray(x_np), jnp.asarray(y_np)
    if w["kind"] == "infer":
        infer = jax.jit(forward)
        return median_time(lambda: infer(params, x).block_until_ready())

    def loss_fn(p, x, y):
        logp = jax.nn.log_softmax(forward(p, x))
        return -jnp.take_along_axis(logp, y[:, None], axis=1).mean()

    # PyTorch's SGD with momentum: buf = momentum * buf + grad; p -= lr * buf.
    def train_step(p, buf, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        buf = jax.tree_util.tree_map(lambda b, gi: MOMENTUM * b + gi, buf, g)
        p = jax.tree_util.tree_map(lambda pi, b: pi - LR * b, p, buf)
        return p, buf, loss

    step = jax.jit(train_step, donate_argnums=(0, 1))
    state = {"p": params, "buf": jax.tree_util.tree_map(jnp.zeros_like, params)}

    def run():
        state["p"], state["buf"], loss = step(state["p"], state["buf"], x, y)
        loss.block_until_ready()
    return median_time(run)


# ---- ONNX Runtime ------------------------------------------------------------

def time_ort(w):
    import onnxruntime as ort
    model = torch_model(w).eval()
    x_np, _ = inputs(w)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.onnx")
        torch.onnx.export(model, torch.from_numpy(x_np), path, input_names=["image"], output_names=["logits"],
                          opset_version=17)
        so = ort.SessionOptions()
        so.intra_op_num_threads = THREADS
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feed = {"image": x_np}
    return median_time(lambda: sess.run(None, feed))


# ---- Samba and the machine ---------------------------------------------------

def benchmark_entries(path):
    """name -> entry of a Google Benchmark JSON file, the median aggregate
    when repetitions were run, the single run otherwise."""
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data["benchmarks"]:
        name = b.get("run_name", b["name"])
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        if name in out and b.get("run_type") != "aggregate":
            continue
        out[name] = b
    return out, data.get("context", {})


def seconds(entry):
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[entry.get("time_unit", "ns")]
    return entry["real_time"] * scale


def machine_limits(path):
    entries, _ = benchmark_entries(path)
    lim = {}
    # machine_bench lists the FMA peak of each vector ISA the CPU has, widest
    # first (BM_FmaPeakFloat32/<isa>/threads:N): the first is the machine's.
    for name, e in entries.items():
        parts = name.split("/")
        if parts[0] == "BM_FmaPeakFloat32" and len(parts) >= 3:
            isa, threads = parts[1], parts[2]
            lim.setdefault("fma_peak_isa", isa)
            if isa != lim["fma_peak_isa"]:
                continue
            if threads == "threads:2":
                lim["fma_peak_flops"] = e["FLOP/s"]
                lim["fma_peak_flops_on_cpu"] = e.get("FLOP/s_on_cpu", 0)
            if threads == "threads:1":
                lim["fma_peak_flops_1t"] = e["FLOP/s"]
        if parts[0] == "BM_DotPeakBfloat16" and "threads:2" in parts:
            lim["bf16_peak_flops"] = e["FLOP/s"]
        if name.startswith("BM_Memcpy256MiB/threads:2"):
            lim["memcpy_bytes_per_s"] = e["B/s"]
    return lim


def versions():
    v = {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__}
    for mod in ("jax", "jaxlib", "onnxruntime", "onnx", "transformers"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception as e:  # a missing peer is reported, not fatal
            v[mod] = "unavailable (%s)" % type(e).__name__
    return v


def label(w):
    if w["model"] == "resffn":
        return "ResFFN %s b%d h%d" % ("training" if w["kind"] == "train" else "inference", w["batch"], w["hidden"])
    return "ConvNet %s b%d" % ("training" if w["kind"] == "train" else "inference", w["batch"])


def fmt_ms(s):
    return "-" if s is None else ("%.3f" % (s * 1e3) if s < 0.01 else "%.2f" % (s * 1e3))


def fmt_ratio(a, b):
    return "-" if a is None or b is None else "%.2f" % (a / b)


def markdown(rows, lim, vers, load):
    peak = lim.get("fma_peak_flops")
    head = ("| Workload | Samba ms | PyTorch ms | JAX jit ms | ORT ms | Samba/PyTorch | Samba/JAX | Samba/ORT "
            "| Samba GFLOP/s | of FMA peak |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        s = r["samba_s"]
        gf = r["flops"] / s * 1e-9 if s else None
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label(r), fmt_ms(s), fmt_ms(r.get("torch_s")), fmt_ms(r.get("jax_s")), fmt_ms(r.get("ort_s")),
            fmt_ratio(s, r.get("torch_s")), fmt_ratio(s, r.get("jax_s")), fmt_ratio(s, r.get("ort_s")),
            "-" if gf is None else "%.1f" % gf, "-" if gf is None or not peak else "%.0f%%" % (100 * gf * 1e9 / peak)))
    lines.append("")
    bf16 = lim.get("bf16_peak_flops")
    lines.append("FMA peak (float32, %s, 2 threads, same run): %s GFLOP/s%s; memcpy (2 threads): %s GB/s; "
                 "load average %s." % (
                     lim.get("fma_peak_isa", "?"), "%.1f" % (peak * 1e-9) if peak else "?",
                     "; bf16 dot-product peak (AVX512_BF16): %.1f GFLOP/s" % (bf16 * 1e-9) if bf16 else "",
                     "%.1f" % (lim["memcpy_bytes_per_s"] * 1e-9) if "memcpy_bytes_per_s" in lim else "?", load))
    lines.append("Peers: " + ", ".join("%s %s" % kv for kv in vers.items()) + ".")
    return "\n".join(lines) + "\n"


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:
        print("peers: no plot (matplotlib: %s)" % e)
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, kind in zip(axes, ("train", "infer")):
        sel = [r for r in rows if r["model"] == "resffn" and r["kind"] == kind]
        xs = [r["batch"] * r["hidden"] for r in sel]
        for key, name, marker in (("samba_s", "Samba", "o"), ("torch_s", "PyTorch eager", "s"),
                                  ("jax_s", "JAX jit", "^"), ("ort_s", "ONNX Runtime", "D")):
            pts = [(x, r[key] * 1e3) for x, r in zip(xs, sel) if r.get(key)]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, label=name)
        # The work itself: contraction FLOP at the measured FMA peak.
        if sel and sel[0].get("peak_flops"):
            ax.plot(xs, [r["flops"] / r["peak_flops"] * 1e3 for r in sel], "k--", lw=1, label="FLOP at FMA peak")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(xs)
        ax.set_xticklabels(["b%d\nh%d" % (r["batch"], r["hidden"]) for r in sel])
        ax.minorticks_off()
        ax.set_xlabel("batch x hidden")
        ax.set_ylabel("ms per step")
        ax.set_title("ResFFNLogReg %s, 2 threads" % ("training step" if kind == "train" else "inference"))
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


PEERS = {"torch": time_torch, "jax": time_jax, "ort": time_ort}


def worker(peer, key):
    """Times one peer on one workload and prints the seconds per step."""
    torch.set_num_threads(THREADS)
    torch.set_num_interop_threads(1)
    if key.startswith("gpt2"):
        print(json.dumps(gpt2.time_peer(peer, key, THREADS)))
        return
    w = next(w for w in workloads() if w["key"] == key)
    print(repr(PEERS[peer](w)))


def time_isolated(peer, key):
    """Each peer and workload in a process of its own: the thread pools a
    framework leaves behind (XLA's, ONNX Runtime's spinning workers) must not
    take cores from the next measurement."""
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", peer, key],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print("peers: %s on %s failed:\n%s" % (peer, key, p.stderr[-2000:]), file=sys.stderr)
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])  # seconds, or GPT-2's {"wall": s, "cpu": s}


def resffn_convnet_rows(args, lim, only):
    samba, _ = benchmark_entries(args.samba)
    rows = []
    for w in workloads():
        if only and w["key"] not in only:
            continue
        r = dict(w)
        r["flops"] = contraction_flops(w)
        r["peak_flops"] = lim.get("fma_peak_flops")
        e = samba.get("e2e/%s/real_time" % w["key"])
        r["samba_s"] = seconds(e) if e else None
        if e:
            for c in ("peak_rss_MiB", "plan_peak_MiB", "plan_lower_MiB", "GFLOPS_pef", "cpu_util"):
                if c in e:
                    r["samba_" + c] = e[c]
        for peer in PEERS:
            if peer == "ort" and w["kind"] == "train":
                continue
            r[peer + "_s"] = time_isolated(peer, w["key"])  # None when it failed: one peer must not hide the others
        print("%-26s samba %9s ms  torch %9s ms  jax %9s ms  ort %9s ms" % (
            w["key"], fmt_ms(r["samba_s"]), fmt_ms(r.get("torch_s")), fmt_ms(r.get("jax_s")),
            fmt_ms(r.get("ort_s"))), flush=True)
        rows.append(r)
    return rows


def gpt2_rows(only):
    """Every peer of a GPT-2 workload, Samba included, in a process of its own."""
    rows = []
    for w in gpt2.workloads():
        if only and w["key"] not in only:
            continue
        r = dict(w, layers=gpt2.layers(), load_before=" ".join(open("/proc/loadavg").read().split()[:3]))
        for peer in w["peers"]:
            t = time_isolated(peer, w["key"]) or {}
            r[peer + "_s"], r[peer + "_cpu_s"], r[peer + "_check"] = t.get("wall"), t.get("cpu"), t.get("check")
        print(gpt2.summary_line(r), flush=True)
        rows.append(r)
    return rows


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samba", help="e2e_bench JSON output (not needed with --gpt2-only)")
    ap.add_argument("--machine", help="machine_bench JSON output (not needed with --gpt2-only)")
    ap.add_argument("--out", required=True, help="directory for peers.json, peers.md, growth.png")
    ap.add_argument("--only", default="", help="comma-separated workload keys (default: all)")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--gpt2-only", action="store_true", help="only the GPT-2 workloads")
    group.add_argument("--no-gpt2", action="store_true", help="leave the GPT-2 workloads out")
    args = ap.parse_args()
    if not args.gpt2_only and not (args.samba and args.machine):
        ap.error("--samba and --machine are needed unless --gpt2-only")

    vers = versions()
    only = set(filter(None, args.only.split(",")))
    lim, context, rows, gpt2_table = {}, {}, [], []
    if not args.gpt2_only:
        _, context = benchmark_entries(args.samba)
        lim = machine_limits(args.machine)
        rows = resffn_convnet_rows(args, lim, only)
    if not args.no_gpt2:
        gpt2_table = gpt2_rows(only)

    load = " ".join(open("/proc/loadavg").read().split()[:3])
    os.makedirs(args.out, exist_ok=True)
    md = markdown(rows, lim, vers, load) if rows else ""
    if gpt2_table:
        md += ("\n" if md else "") + gpt2.markdown(gpt2_table, THREADS, vers, load)
    with open(os.path.join(args.out, "peers.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "peers.json"), "w") as f:
        json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "versions": vers,
                   "machine_limits": lim, "load_average_end": load, "samba_context": context,
                   "threads": THREADS, "xla_flags": os.environ.get("XLA_FLAGS", ""), "rows": rows,
                   "gpt2_rows": gpt2_table}, f, indent=1)
    print()
    print(md)
    if rows and plot(rows, os.path.join(args.out, "growth.png")):
        print("plot: %s" % os.path.join(args.out, "growth.png"))


if __name__ == "__main__":
    main()
