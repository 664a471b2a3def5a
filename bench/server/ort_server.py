"""The benchmark's reference: the same ResFFN classifier (784 features,
hidden 1024, 10 classes; bench/peers/peers.py's torch module) exported to
ONNX and served by ONNX Runtime's Python API behind a minimal threaded HTTP
server speaking samba-server's JSON request format for one input.

    python ort_server.py --port-file FILE [--hidden 1024] [--threads 2]

POST /v1/models/resffn/infer with {"inputs": {"image": {"shape": [784] or
[n, 784], "dtype": "float32", "data": [...]}}} answers {"outputs":
{"logits": {...}}}. One InferenceSession serves every request thread (its
run() is thread-safe); each request runs alone: no batching.
"""

import argparse
import json
import os
import sys
import tempfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import onnxruntime as ort
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))
from peers import FEATURES, ResFFN  # noqa: E402


def make_session(hidden, threads):
    torch.manual_seed(0)
    model = ResFFN(hidden).eval()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "resffn.onnx")
        torch.onnx.export(model, torch.zeros(1, FEATURES), path, input_names=["image"], output_names=["logits"],
                          dynamic_axes={"image": {0: "n"}, "logits": {0: "n"}}, opset_version=17)
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    session = make_session(args.hidden, args.threads)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as wrk expects
        # Headers and body go out in two writes: without TCP_NODELAY the body
        # waits for the client's delayed ACK (40 ms on Linux).
        disable_nagle_algorithm = True

        def log_message(self, *a):
            pass

        def answer(self, status, doc):
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                spec = json.loads(body)["inputs"]["image"]
                x = np.asarray(spec["data"], dtype=np.float32).reshape(spec["shape"])
            except (ValueError, KeyError, TypeError) as e:
                return self.answer(400, {"error": str(e)})
            single = x.ndim == 1
            (logits,) = session.run(None, {"image": x.reshape(1, -1) if single else x})
            out = logits[0] if single else logits
            self.answer(200, {"model": "resffn", "outputs": {"logits": {
                "shape": list(out.shape), "dtype": "float32", "data": out.ravel().tolist()}}})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(args.port_file + ".tmp", "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(args.port_file + ".tmp", args.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
