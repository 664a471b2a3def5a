"""samba-server with a PEF whose tensors share no batch dim: the training PEF
of examples/c/resffn_logreg.c (inputs image [4, 64] and label [4], outputs a
scalar loss and the logits). Such a model takes whole inputs, one request
per run, and its inputs by name; the server refuses a sample-shaped input
and an .npy body that does not name its input.

    python3 server_unbatched_test.py SERVER RESFFN_LOGREG WORKDIR
"""

import http.client
import json
import os
import signal
import subprocess
import sys
import time


def post(port, path, body, content_type="application/json"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", path, body=body, headers={"Content-Type": content_type})
    r = c.getresponse()
    return r.status, json.loads(r.read())


def main():
    server, resffn_logreg, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    pef, port_file = os.path.join(workdir, "train.pef"), os.path.join(workdir, "port")
    subprocess.run([resffn_logreg, "compile", "-b", "4", "--hidden", "8", "-p", pef], check=True,
                   stdout=subprocess.DEVNULL)
    if os.path.exists(port_file):
        os.remove(port_file)
    proc = subprocess.Popen([server, "--model", "train=" + pef, "--port", "0", "--port-file", port_file],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    failures = []
    try:
        for _ in range(600):
            if os.path.exists(port_file):
                break
            time.sleep(0.1)
        port = int(open(port_file).read())
        image = {"shape": [4, 64], "data": [0.01 * i for i in range(256)]}
        label = {"shape": [4], "dtype": "int64", "data": [1, 2, 3, 4]}
        status, doc = post(port, "/v1/models/train/infer", json.dumps({"inputs": {"image": image, "label": label}}))
        outputs = doc.get("outputs", {})
        shapes = sorted(o["shape"] for o in outputs.values())
        if status != 200 or shapes != [[], [4, 10]]:
            failures.append("whole inputs: HTTP %d %s" % (status, doc))
        # Answers do not depend on earlier runs: the same inputs, the same outputs.
        status, again = post(port, "/v1/models/train/infer", json.dumps({"inputs": {"image": image, "label": label}}))
        if again != doc:
            failures.append("the same request answered differently: %s / %s" % (doc, again))
        refusals = [
            ({"inputs": {"image": {"shape": [64], "data": [0.0] * 64}, "label": label}}, "expected [4, 64]"),
            ({"inputs": {"image": image}}, "input 'label' of model 'train' is missing"),
        ]
        for body, word in refusals:
            status, doc = post(port, "/v1/models/train/infer", json.dumps(body))
            if status != 400 or word not in doc.get("error", ""):
                failures.append("expected 400 with '%s', got HTTP %d %s" % (word, status, doc))
        status, doc = post(port, "/v1/models/train/infer", b"\x93NUMPY", "application/x-npy")
        if status != 400 or "has 2 inputs; name the one" not in doc.get("error", ""):
            failures.append(".npy without ?input=: HTTP %d %s" % (status, doc))
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    if proc.returncode != 0:
        failures.append("the server exited with %d:\n%s" % (proc.returncode, out))
    if "answered 2 requests with 2xx, 3 with 4xx, 0 with 5xx" not in out:
        failures.append("the server's summary:\n" + out)
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else "%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
