"""Samba against its peers on the seed's ResFFNLogReg, in one run.

Same model (784 features, 10 classes: gemm1, layer_norm, tanh, gemm2,
layer_norm, residual add, sigmoid, gemm3, cross_entropy), same shapes, two
threads, each timed after warm-up as the median of repeats:
  - PyTorch eager: a training step (SGD with momentum) and inference;
  - JAX: the whole training step jit-compiled (value_and_grad and the SGD
    update in one function), and jitted inference;
  - ONNX Runtime: inference of the model exported by torch.onnx.export;
  - Samba: build/bench/runtime_bench (compile once, run the PEF).
Prints one table (times, ratios Samba / peer, Samba FLOP/s / FMA peak) and
writes it as Markdown. Run through bench/peers/run_peers.sh.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

THREADS = 2
FEATURES, CLASSES = 784, 10
SIZES = [(16, 256), (256, 1024), (1024, 2048)]

os.environ.setdefault("XLA_FLAGS", f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={THREADS}")
os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))


def model_flops(batch, hidden, train):
    fwd = 2.0 * batch * (FEATURES * hidden + hidden * hidden + CLASSES * hidden)
    return fwd * (3.0 if train else 1.0)


def median_seconds(fn, warmup, repeats, budget_s=20.0):
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if time.perf_counter() - start > budget_s and len(times) >= 3:
            break
    return statistics.median(times)


def repeats_for(batch, hidden):
    return max(5, int(2e9 / model_flops(batch, hidden, True)))


# ---- PyTorch --------------------------------------------------------------------------

def torch_peer(batch, hidden):
    import torch

    torch.set_num_threads(THREADS)
    torch.manual_seed(0)

    class ResFFNLogReg(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gemm1 = torch.nn.Linear(FEATURES, hidden)
            self.norm1 = torch.nn.LayerNorm(hidden)
            self.gemm2 = torch.nn.Linear(hidden, hidden)
            self.norm2 = torch.nn.LayerNorm(hidden)
            self.gemm3 = torch.nn.Linear(hidden, CLASSES)
            self.loss = torch.nn.CrossEntropyLoss()

        def forward(self, x, y):
            h = torch.tanh(self.norm1(self.gemm1(x)))
            s = torch.sigmoid(self.norm2(self.gemm2(h)) + h)
            logits = self.gemm3(s)
            return self.loss(logits, y), logits

    m = ResFFNLogReg()
    x = torch.randn(batch, FEATURES)
    y = torch.arange(batch) % CLASSES
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=True)
        loss, _ = m(x, y)
        loss.backward()
        opt.step()

    def infer():
        with torch.no_grad():
            m(x, y)

    reps = repeats_for(batch, hidden)
    return m, x, y, median_seconds(step, 3, reps), median_seconds(infer, 3, reps * 3)


def onnx_peer(model, x, y, batch, hidden, workdir):
    import onnxruntime as ort
    import torch

    path = os.path.join(workdir, f"resffn_{batch}_{hidden}.onnx")
    model.eval()
    torch.onnx.export(model, (x, y), path, input_names=["x", "y"], output_names=["loss", "logits"], opset_version=13)
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    import numpy as np
    # Through lists: Debian's torch is built against an older numpy than the
    # one jax and onnxruntime bring into the environment.
    feeds = {"x": np.array(x.tolist(), dtype=np.float32), "y": np.array(y.tolist(), dtype=np.int64)}
    return median_seconds(lambda: sess.run(None, feeds), 5, repeats_for(batch, hidden) * 3)


# ---- JAX ------------------------------------------------------------------------------

def jax_peer(batch, hidden):
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    ks = jax.random.split(key, 4)

    def linear(k, fan_in, fan_out):
        bound = 1.0 / fan_in ** 0.5
        return {"w": jax.random.uniform(k, (fan_out, fan_in), minval=-bound, maxval=bound),
                "b": jnp.zeros((fan_out,))}

    params = {"gemm1": linear(ks[0], FEATURES, hidden), "gemm2": linear(ks[1], hidden, hidden),
              "gemm3": linear(ks[2], hidden, CLASSES),
              "norm1": {"w": jnp.ones((hidden,)), "b": jnp.zeros((hidden,))},
              "norm2": {"w": jnp.ones((hidden,)), "b": jnp.zeros((hidden,))}}

    def layer_norm(p, v):
        mu = v.mean(-1, keepdims=True)
        var = ((v - mu) ** 2).mean(-1, keepdims=True)
        return (v - mu) * jax.lax.rsqrt(var + 1e-5) * p["w"] + p["b"]

    def forward(p, x, y):
        h = jnp.tanh(layer_norm(p["norm1"], x @ p["gemm1"]["w"].T + p["gemm1"]["b"]))
        s = jax.nn.sigmoid(layer_norm(p["norm2"], h @ p["gemm2"]["w"].T + p["gemm2"]["b"]) + h)
        logits = s @ p["gemm3"]["w"].T + p["gemm3"]["b"]
        logp = jax.nn.log_softmax(logits)
        return -jnp.take_along_axis(logp, y[:, None], axis=1).mean(), logits

    @jax.jit
    def step(p, mom, x, y):
        (loss, _), g = jax.value_and_grad(forward, has_aux=True)(p, x, y)
        mom = jax.tree_util.tree_map(lambda m, gg: 0.9 * m + gg, mom, g)
        p = jax.tree_util.tree_map(lambda w, m: w - 0.01 * m, p, mom)
        return p, mom, loss

    infer = jax.jit(forward)
    x = jax.random.normal(ks[3], (batch, FEATURES))
    y = jnp.arange(batch) % CLASSES
    state = {"p": params, "m": jax.tree_util.tree_map(jnp.zeros_like, params)}

    def run_step():
        state["p"], state["m"], loss = step(state["p"], state["m"], x, y)
        loss.block_until_ready()

    def run_infer():
        jax.block_until_ready(infer(state["p"], x, y))

    reps = repeats_for(batch, hidden)
    return median_seconds(run_step, 3, reps), median_seconds(run_infer, 3, reps * 3)


# ---- Samba ----------------------------------------------------------------------------

def samba_figures(build):
    out = subprocess.run([os.path.join(build, "bench", "runtime_bench"), "--benchmark_format=json",
                          "--benchmark_filter=ResFFN|Tiny"], check=True, capture_output=True, text=True).stdout
    res = {}
    for b in json.loads(out)["benchmarks"]:
        res[b["name"]] = b
    machine = subprocess.run([os.path.join(build, "bench", "machine_bench"), "--benchmark_format=json",
                              "--benchmark_filter=FmaPeak.*threads:2"], check=True, capture_output=True,
                             text=True).stdout
    peak = json.loads(machine)["benchmarks"][0]["FLOP/s"]
    return res, peak


def seconds(b):
    unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
    return b["real_time"] * unit


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="build/bench-results/peers.md")
    args = ap.parse_args()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    workdir = os.path.dirname(args.out)

    samba, peak = samba_figures(args.build)
    versions = {"python": platform.python_version()}
    rows = []
    for batch, hidden in SIZES:
        tr = samba[f"BM_ResFFNTrainStep/batch:{batch}/hidden:{hidden}/real_time"]
        inf = samba[f"BM_ResFFNInference/batch:{batch}/hidden:{hidden}/real_time"]
        s_train, s_inf = seconds(tr), seconds(inf)
        row = {"batch": batch, "hidden": hidden, "samba_train": s_train, "samba_infer": s_inf}
        try:
            import torch
            versions["torch"] = torch.__version__
            m, x, y, row["torch_train"], row["torch_infer"] = torch_peer(batch, hidden)
            try:
                import onnxruntime
                versions["onnxruntime"] = onnxruntime.__version__
                row["ort_infer"] = onnx_peer(m, x, y, batch, hidden, workdir)
            except ImportError as e:
                print(f"ONNX Runtime skipped: {e}", file=sys.stderr)
        except ImportError as e:
            print(f"PyTorch skipped: {e}", file=sys.stderr)
        try:
            import jax
            versions["jax"] = jax.__version__
            row["jax_train"], row["jax_infer"] = jax_peer(batch, hidden)
        except ImportError as e:
            print(f"JAX skipped: {e}", file=sys.stderr)
        row["train_peak"] = model_flops(batch, hidden, True) / s_train / peak
        row["infer_peak"] = model_flops(batch, hidden, False) / s_inf / peak
        rows.append(row)

    def ms(v):
        return f"{v * 1e3:.3f}" if v is not None else "-"

    def ratio(a, b):
        return f"{a / b:.2f}" if b else "-"

    lines = [f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average "
             f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}; {THREADS} threads; FMA peak (2 threads, "
             f"machine_bench, same run): {peak / 1e9:.1f} GFLOP/s; versions: "
             + ", ".join(f"{k} {v}" for k, v in versions.items()),
             "",
             "| workload | batch/hidden | Samba ms | PyTorch ms | JAX jit ms | ONNX Runtime ms | "
             "Samba/PyTorch | Samba/JAX | Samba/ORT | Samba FLOP/s / peak |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        bh = f"{r['batch']}/{r['hidden']}"
        lines.append(f"| training step | {bh} | {ms(r['samba_train'])} | {ms(r.get('torch_train'))} | "
                     f"{ms(r.get('jax_train'))} | - | {ratio(r['samba_train'], r.get('torch_train'))} | "
                     f"{ratio(r['samba_train'], r.get('jax_train'))} | - | {r['train_peak']:.1%} |")
        lines.append(f"| inference | {bh} | {ms(r['samba_infer'])} | {ms(r.get('torch_infer'))} | "
                     f"{ms(r.get('jax_infer'))} | {ms(r.get('ort_infer'))} | "
                     f"{ratio(r['samba_infer'], r.get('torch_infer'))} | {ratio(r['samba_infer'], r.get('jax_infer'))}"
                     f" | {ratio(r['samba_infer'], r.get('ort_infer'))} | {r['infer_peak']:.1%} |")
    tiny = samba.get("BM_TinySectionCall")
    lat = samba.get("BM_TinyRunLatency/iterations:1")
    if tiny:
        lines.append("")
        lines.append(f"Fixed cost of one section call on a tiny graph: {seconds(tiny) * 1e6:.2f} us (wall), "
                     f"{tiny['cpu_time'] * (1e-3 if tiny['time_unit'] == 'ns' else 1):.2f} us CPU.")
    if lat:
        lines.append(f"Whole run() on a tiny graph over 10,000 runs: p50 {lat['p50_us']:.2f} us, "
                     f"p99 {lat['p99_us']:.2f} us (p99/p50 = {lat['p99_over_p50']:.2f}).")
    text = "\n".join(lines)
    print(text)
    with open(args.out, "w") as f:
        f.write(text + "\n")
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
