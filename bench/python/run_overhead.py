"""The Python binding's overhead on session.run: a tiny graph (y = x @ w,
4x4) run N times from Python, against the same runs timed inside the C ABI
(samba_session_measure_performance). Prints both per-call times and their
difference, the overhead the issue bounds at 20 us.

    SAMBA_LIBRARY=build/libsamba.so PYTHONPATH=bindings/python \\
        python3 bench/python/run_overhead.py [--iterations 20000]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import sambaflow.samba as samba


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    w = samba.parameter("w", (4, 4))
    x = samba.randn(4, 4, name="x")

    def model(x):
        return x @ w

    s = samba.SambaSession(num_threads=1)
    samba.session = s
    with tempfile.TemporaryDirectory() as d:
        pef = s.compile(model, (x,), name="tiny", pef_path=os.path.join(d, "tiny.pef"), inference=True)
        outs = s.trace_graph(model, (x,), pef_path=pef)
    inputs, section = [x], ["FWD"]
    for _ in range(1000):
        s.run(inputs, outs, section_types=section)

    py, c = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(args.iterations):
            s.run(inputs, outs, section_types=section)
        py.append((time.perf_counter() - t0) / args.iterations * 1e6)
        c.append(s.measure_performance(inputs, args.iterations, 100, section)["latency_mean_ms"] * 1e3)
    p, k = statistics.median(py), statistics.median(c)
    print(f"session.run from Python: {p:.2f} us/call; in the C ABI: {k:.2f} us/call; "
          f"Python overhead: {p - k:.2f} us/call (median of {args.repeats} x {args.iterations} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
