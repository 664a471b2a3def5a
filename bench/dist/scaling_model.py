#!/usr/bin/env python3
"""The scaling model of data-parallel training (docs/DISTRIBUTED.md): an
alpha-beta cost model of ring all-reduce, calibrated on this machine's
loopback measurements (dist_bench's JSON), predicting the step time and
scaling efficiency of the example models at 2, 8, 64 and 512 replicas on a
25 Gb/s and a 100 Gb/s network, each with the gradient bucket size that
hides the most communication behind the backward pass.

    python3 bench/dist/scaling_model.py --calibration OUT/resffn_h1024.json [OUT/resffn_h128.json ...]
                                        [--markdown table.md] [--plot scaling.png]

Ring all-reduce of n bytes over p ranks takes 2(p-1) steps, each moving
n/p bytes: t(n, p) = 2(p-1) * alpha + 2(p-1)/p * n * beta. On a network,
alpha is the loopback alpha (the MPI library's own per-message cost, as
measured) plus a per-hop wire latency (--hop-latency-us, default 10 us,
typical of TCP over a data-center switch), and beta is the wire's time per
byte (8 / bandwidth) plus the loopback beta (the copy and the reduction of
each byte, which the wire does not do for us).

Overlap ("inorder" mode): the backward pass (2/3 of the compute step, the
usual FLOP split of a training step, unless the calibration measured it)
produces the gradient buckets evenly in reverse order; a bucket's
all-reduce starts when it is produced and the previous one is done; OPT
starts after the last. Step = max(compute, last all-reduce end) + OPT.
Efficiency is compute step / predicted step (weak scaling: every replica
keeps its batch).
"""
import argparse
import json
import math
import sys

REPLICAS = (2, 8, 64, 512)
NETWORKS = {"25 Gb/s": 25e9, "100 Gb/s": 100e9}
BUCKETS = tuple(2 ** k for k in range(16, 29))  # 64 KiB .. 256 MiB
BACKWARD_SHARE = 2 / 3
OPT_SHARE = 0.05  # of the compute step: the optimizer's elementwise pass


def ring_allreduce_s(nbytes, p, alpha, beta):
    """Seconds for one ring all-reduce of `nbytes` over `p` ranks."""
    if p < 2:
        return 0.0
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * nbytes * beta


def predicted_step_s(compute_s, grad_bytes, p, alpha, beta, bucket_bytes):
    """Step time with gradient buckets all-reduced in order, each as soon as produced."""
    opt_s = OPT_SHARE * compute_s
    forward_s = (1 - BACKWARD_SHARE - OPT_SHARE) * compute_s
    backward_s = BACKWARD_SHARE * compute_s
    n_buckets = max(1, math.ceil(grad_bytes / bucket_bytes))
    comm_end = 0.0
    for i in range(n_buckets):
        size = min(bucket_bytes, grad_bytes - i * bucket_bytes)
        ready = forward_s + backward_s * (i + 1) / n_buckets
        comm_end = max(ready, comm_end) + ring_allreduce_s(size, p, alpha, beta)
    return max(forward_s + backward_s, comm_end) + opt_s


def best_bucket(compute_s, grad_bytes, p, alpha, beta):
    """(bucket bytes, step seconds) of the bucket size with the shortest predicted step."""
    # Buckets at least as large as the gradients are all one bucket: the
    # smallest of equal steps is reported.
    return min(((b, predicted_step_s(compute_s, grad_bytes, p, alpha, beta, b)) for b in BUCKETS),
               key=lambda x: (round(x[1], 12), x[0]))


def fit_alpha_beta(points, p):
    """alpha, beta of ring all-reduce from (bytes, seconds) measured at p ranks.

    Least squares on the relative error (weights 1/t^2): the sweep spans
    six orders of magnitude in time, and plain least squares would fit the
    largest messages alone and leave alpha to their noise."""
    k = 2 * (p - 1)
    rows = [(k, 2 * (p - 1) / p * n, t) for n, t in points]
    # Normal equations of sum(((k*alpha + x*beta) - t) / t)^2.
    saa = sum((a / t) ** 2 for a, _, t in rows)
    sab = sum(a * x / t ** 2 for a, x, t in rows)
    sbb = sum((x / t) ** 2 for _, x, t in rows)
    sa1 = sum(a / t for a, _, t in rows)
    sb1 = sum(x / t for _, x, t in rows)
    det = saa * sbb - sab * sab
    alpha = (sa1 * sbb - sb1 * sab) / det
    beta = (saa * sb1 - sab * sa1) / det
    return max(alpha, 0.0), max(beta, 0.0)


def load_calibrations(paths):
    models, fits = [], []
    for path in paths:
        with open(path) as f:
            c = json.load(f)
        fits.append(fit_alpha_beta([(s["bytes"], s["seconds"]) for s in c["allreduce_sweep"]], c["world_size"]))
        models.append({"name": c["model"], "params": c["grad_bytes"] // 4, "grad_bytes": c["grad_bytes"],
                       "compute_s": c["compute_step_ms"] / 1000, "batch": c["batch_per_replica"],
                       "loadavg": c.get("loadavg", "")})
    # Every file was measured on the same loopback: their fits are averaged.
    alpha = sum(a for a, _ in fits) / len(fits)
    beta = sum(b for _, b in fits) / len(fits)
    return models, alpha, beta


def table(models, alpha_loop, beta_loop, hop_latency_s):
    rows = []
    for m in models:
        for net, bw in NETWORKS.items():
            alpha, beta = alpha_loop + hop_latency_s, beta_loop + 8 / bw
            for p in REPLICAS:
                bucket, step = best_bucket(m["compute_s"], m["grad_bytes"], p, alpha, beta)
                comm = ring_allreduce_s(m["grad_bytes"], p, alpha, beta)
                rows.append({"model": m["name"], "network": net, "replicas": p, "bucket_bytes": bucket,
                             "grad_bytes": m["grad_bytes"],
                             "compute_ms": 1e3 * m["compute_s"], "allreduce_ms": 1e3 * comm,
                             "step_ms": 1e3 * step, "efficiency": m["compute_s"] / step,
                             "samples_per_s": p * m["batch"] / step})
    return rows


def human_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return str(n)


def markdown(rows, models, alpha, beta, hop_latency_s):
    out = [f"Calibration (loopback): alpha = {alpha * 1e6:.2f} us, beta = {beta * 1e9:.3f} ns/byte "
           f"({1 / beta / 1e9 if beta else float('inf'):.2f} GB/s); network alpha adds {hop_latency_s * 1e6:g} us "
           f"per hop.", ""]
    for m in models:
        out.append(f"- {m['name']}: {m['params']:,} parameters ({human_bytes(m['grad_bytes'])} of gradients), "
                   f"compute step {1e3 * m['compute_s']:.2f} ms at batch {m['batch']} per replica "
                   f"(load average {m['loadavg']})")
    out += ["", "| model | network | replicas | best bucket | all-reduce (ms) | step (ms) | efficiency | samples/s |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        bucket = human_bytes(r["bucket_bytes"]) if r["bucket_bytes"] < r["grad_bytes"] else "one (all)"
        out.append(f"| {r['model']} | {r['network']} | {r['replicas']} | {bucket} | "
                   f"{r['allreduce_ms']:.2f} | {r['step_ms']:.2f} | {100 * r['efficiency']:.0f}% | "
                   f"{r['samples_per_s']:.0f} |")
    return "\n".join(out) + "\n"


def _series(rows):
    return {(m, n): [r for r in rows if r["model"] == m and r["network"] == n]
            for m, n in sorted({(r["model"], r["network"]) for r in rows})}


def svg_plot(rows, path):
    """The efficiency plot as a plain SVG, for machines without matplotlib."""
    w, h, left, top, right, bottom = 640, 400, 60, 30, 200, 50
    colors = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
    xs = {p: left + (w - left - right) * i / (len(REPLICAS) - 1) for i, p in enumerate(REPLICAS)}

    def y(eff):
        return top + (h - top - bottom) * (1 - eff)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
           f'font-size="11"><rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="13">Predicted data-parallel scaling efficiency</text>']
    for pct in range(0, 101, 25):
        out.append(f'<line x1="{left}" x2="{w - right}" y1="{y(pct / 100):.1f}" y2="{y(pct / 100):.1f}" '
                   f'stroke="#ddd"/><text x="{left - 8}" y="{y(pct / 100) + 4:.1f}" text-anchor="end">{pct}%</text>')
    for p, x in xs.items():
        out.append(f'<text x="{x:.1f}" y="{h - bottom + 16}" text-anchor="middle">{p}</text>')
    out.append(f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle">replicas</text>')
    for i, ((model, net), pts) in enumerate(_series(rows).items()):
        c = colors[i % len(colors)]
        line = " ".join(f"{xs[r['replicas']]:.1f},{y(r['efficiency']):.1f}" for r in pts)
        out.append(f'<polyline points="{line}" fill="none" stroke="{c}" stroke-width="2"/>')
        out += [f'<circle cx="{xs[r["replicas"]]:.1f}" cy="{y(r["efficiency"]):.1f}" r="3" fill="{c}"/>' for r in pts]
        ly = top + 16 * i
        out.append(f'<line x1="{w - right + 10}" x2="{w - right + 28}" y1="{ly}" y2="{ly}" stroke="{c}" '
                   f'stroke-width="2"/><text x="{w - right + 32}" y="{ly + 4}">{model}, {net}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return True


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        svg = path.rsplit(".", 1)[0] + ".svg"
        print(f"matplotlib is not installed: the plot is an SVG, {svg}", file=sys.stderr)
        return svg_plot(rows, svg) and svg
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (model, net), pts in _series(rows).items():
        ax.plot([r["replicas"] for r in pts], [100 * r["efficiency"] for r in pts], marker="o",
                label=f"{model}, {net}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("replicas")
    ax.set_ylabel("predicted scaling efficiency (%)")
    ax.set_ylim(0, 105)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Data-parallel scaling (ring all-reduce, alpha-beta model)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calibration", nargs="+", required=True, help="dist_bench --out files")
    ap.add_argument("--hop-latency-us", type=float, default=10.0)
    ap.add_argument("--markdown", default=None, help="write the table here too")
    ap.add_argument("--json", default=None, help="write the rows as JSON here")
    ap.add_argument("--plot", default=None, help="write the efficiency plot (PNG; an SVG beside it without matplotlib)")
    args = ap.parse_args(argv)
    models, alpha, beta = load_calibrations(args.calibration)
    rows = table(models, alpha, beta, args.hop_latency_us * 1e-6)
    text = markdown(rows, models, alpha, beta, args.hop_latency_us * 1e-6)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"alpha_s": alpha, "beta_s_per_byte": beta, "rows": rows}, f, indent=1)
    written = plot(rows, args.plot) if args.plot else None
    if written:
        print(f"plot: {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
