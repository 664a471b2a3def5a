"""ONNX models in, measured: import + compile time of a chain of 100 and of
10,000 ONNX nodes (growth should be linear), and the inference latency of the
imported models on Samba beside ONNX Runtime on the same file, in one run.

    bash bench/onnx/run_onnx_bench.sh [BUILD_DIR]   (makes bench/.venv's onnxruntime)

The models are chains of (MatMul, Add, Relu) blocks at width 32, batch 8,
written at opset 17 / IR 8 (what libonnx 1.12 reads). Both runtimes get the
same thread count (--threads). Prints a Markdown table and the load average."""
import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import sambaflow.samba as samba
from sambaflow.samba.onnx_import import OnnxModel

WIDTH, BATCH = 32, 8


def chain(nodes, path):
    """A chain of `nodes` ONNX nodes (whole MatMul/Add/Relu blocks) saved at `path`."""
    rng = np.random.default_rng(0)
    graph_nodes, inits, x = [], [], "x"
    for i in range(nodes // 3):
        w = rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / np.sqrt(WIDTH)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(np.zeros(WIDTH, np.float32), f"b{i}")]
        graph_nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]),
                        helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
                        helper.make_node("Relu", [f"a{i}"], [f"r{i}"])]
        x = f"r{i}"
    graph = helper.make_graph(graph_nodes, f"chain{nodes}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, WIDTH])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [BATCH, WIDTH])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, path)
    return len(graph_nodes)


def median_ms(fn, runs):
    for _ in range(max(3, runs // 10)):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def measure(nodes, threads, runs, workdir):
    path = os.path.join(workdir, f"chain{nodes}.onnx")
    n = chain(nodes, path)
    x_np = np.random.default_rng(1).standard_normal((BATCH, WIDTH), dtype=np.float32)

    s = samba.SambaSession(num_threads=threads)
    samba.session = s
    t0 = time.perf_counter()
    model = OnnxModel(path)
    t_import = time.perf_counter() - t0
    x = samba.from_numpy(x_np.copy(), name="x")
    t0 = time.perf_counter()
    pef = s.compile(model, [x], name=f"chain{nodes}", pef_path=os.path.join(workdir, f"chain{nodes}.pef"),
                    inference=True)
    t_compile = time.perf_counter() - t0
    outs = s.trace_graph(model, [x], pef_path=pef, init_output_grads=False)
    samba_ms = median_ms(lambda: s.run([x], outs, section_types=["fwd"]), runs)
    got = s.run([x], outs, section_types=["fwd"])[0].numpy()

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    ort_ms = median_ms(lambda: sess.run(None, {"x": x_np}), runs)
    want = sess.run(None, {"x": x_np})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    return {"nodes": n, "import_s": t_import, "compile_s": t_compile, "samba_ms": samba_ms, "ort_ms": ort_ms}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 10000])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    load_before = open("/proc/loadavg").read().split()[:3]
    with tempfile.TemporaryDirectory() as d:
        rows = [measure(n, args.threads, args.runs, d) for n in args.nodes]
    load_after = open("/proc/loadavg").read().split()[:3]
    print(f"onnxruntime {ort.__version__}; {args.threads} threads each; median of {args.runs} runs; "
          f"batch {BATCH}, width {WIDTH}; load average {' '.join(load_before)} before, "
          f"{' '.join(load_after)} after")
    print("| ONNX nodes | import | compile | import + compile per node | Samba latency | ORT latency | Samba / ORT |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        per_node = (r["import_s"] + r["compile_s"]) / r["nodes"] * 1e6
        print(f"| {r['nodes']} | {r['import_s'] * 1e3:.1f} ms | {r['compile_s'] * 1e3:.1f} ms | {per_node:.1f} us "
              f"| {r['samba_ms']:.3f} ms | {r['ort_ms']:.3f} ms | {r['samba_ms'] / r['ort_ms']:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
