"""`sambaflow compile` and `sambaflow run` on a small ONNX model (x: (N, 3) ->
Gemm -> Relu -> Gemm -> Softmax -> y): the outputs match the model run
eagerly through the Python binding, and bad input (missing file, unknown
input name, wrong shape, a malformed .npy, a bad --input) is an error message
and exit code 1, never a crash.

Usage: sambaflow_model_test.py SAMBAFLOW LIBSAMBA WORKDIR (numpy and onnx
needed; exit 77, skipped, without them)."""
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    print("skipped: no numpy or onnx (Debian: python3-numpy, python3-onnx)")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = "mlp.onnx"
failures = []


def write_mlp(path):
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal(shape, dtype=np.float32), name)
             for name, shape in (("w1", (4, 3)), ("b1", (4,)), ("w2", (2, 4)), ("b2", (2,)))]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["z"], transB=1),
             helper.make_node("Softmax", ["z"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def sambaflow(*args, want_rc=0, needle=""):
    p = subprocess.run([SAMBAFLOW, *args], capture_output=True, text=True)
    text = p.stdout + p.stderr
    ok = p.returncode == want_rc and needle in text and "Segmentation" not in text and "terminate" not in text
    if not ok:
        failures.append(f"sambaflow {' '.join(args)}: exit {p.returncode} (want {want_rc}), "
                        f"wanted {needle!r} in:\n{text}")
    return p


def main():
    global SAMBAFLOW
    SAMBAFLOW, lib, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.chdir(work)
    write_mlp(MLP)
    x = np.array([[1, 2, 3], [-1, 0.5, 2]], dtype=np.float32)
    np.save("x.npy", x)
    np.save("x_wide.npy", np.zeros((2, 4), np.float32))
    with open("bad.npy", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00\xff\x00{'descr': '<f4'")

    sambaflow("--help", needle="compile")
    sambaflow("compile", "--help", needle="--inference")
    sambaflow("run", "--help", needle="--output-dir")
    sambaflow("compile", MLP, "-o", "mlp.pef", "--inference", "-b", "2", needle="wrote mlp.pef")
    sambaflow("compile", MLP, "-o", "train.pef", "-b", "2", needle="wrote train.pef (training")
    # Outputs are files named after the ONNX outputs (the model's is "y").
    p = sambaflow("run", "mlp.pef", "--input", "x=x.npy", "--output-dir", "out", needle="y -> out/y.npy")
    written = [f for f in os.listdir("out")] if os.path.isdir("out") else []
    if p.returncode == 0 and written == ["y.npy"]:
        os.environ["SAMBA_LIBRARY"] = lib
        sys.path.insert(0, os.path.join(ROOT, "bindings/python"))
        from sambaflow.samba.onnx_import import OnnxModel
        from sambaflow.samba.tensor import from_numpy
        want = OnnxModel(MLP)(from_numpy(x)).numpy()
        got = np.load(os.path.join("out", written[0]))
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-6):
            failures.append(f"run's output {got} differs from the eager model's {want}")
    else:
        failures.append(f"run wrote {written}, expected ['y.npy']")

    # A training PEF runs its whole schedule (forward, backward, the SGD
    # step); each run loads the PEF afresh, so two runs give the same outputs.
    first = sambaflow("run", "train.pef", "--input", "x=x.npy", "--output-dir", "t1", needle="y -> t1/y.npy")
    second = sambaflow("run", "train.pef", "--input", "x=x.npy", "--output-dir", "t2", needle="y -> t2/y.npy")
    if first.returncode == 0 and second.returncode == 0 and not np.array_equal(np.load("t1/y.npy"),
                                                                              np.load("t2/y.npy")):
        failures.append("two runs of a freshly loaded training PEF differ")

    # Mixed precision: the PEF and its log say bf16, and the softmax outputs
    # agree with the fp32 compile's to bf16 precision.
    sambaflow("compile", MLP, "-o", "bf16.pef", "--inference", "-b", "2", "--mixed-precision", "bf16",
              needle="wrote bf16.pef (inference, 1 inputs, mixed precision)")
    with open("bf16.pef.log") as f:
        if "mixed precision bf16" not in f.read():
            failures.append("bf16.pef.log does not say 'mixed precision bf16'")
    sambaflow("pef", "info", "bf16.pef", needle="(o1, mixed precision bf16)")
    p = sambaflow("run", "bf16.pef", "--input", "x=x.npy", "--output-dir", "b", needle="y -> b/y.npy")
    if p.returncode == 0 and os.path.exists("out/y.npy"):
        got, want = np.load("b/y.npy"), np.load("out/y.npy")
        if got.dtype != np.float32 or not np.allclose(got, want, atol=2e-2):
            failures.append(f"the bf16 PEF's output {got} is not the fp32 one {want} to bf16 precision")

    # Bad input: each an error naming what was wrong.
    sambaflow("compile", MLP, "-o", "m.pef", "--mixed-precision", "fp8", want_rc=1,
              needle="mixed precision 'fp8' is not supported; expected 'none' or 'bf16'")
    sambaflow("compile", "missing.onnx", "-o", "m.pef", want_rc=2, needle="missing.onnx")
    sambaflow("compile", "bad.npy", "-o", "m.pef", want_rc=1, needle="not a valid ONNX ModelProto")
    sambaflow("compile", MLP, "-o", "m.pef", "--loss", "nope", want_rc=1, needle="its outputs are: y")
    sambaflow("run", "missing.pef", "--input", "x=x.npy", want_rc=2, needle="missing.pef")
    sambaflow("run", "mlp.pef", "--input", "z=x.npy", want_rc=1,
              needle="the PEF has no input 'z'; its inputs are: x")
    sambaflow("run", "mlp.pef", "--input", "x=x_wide.npy", want_rc=1, needle="has shape [2, 4]; the PEF expects [2, 3]")
    sambaflow("run", "mlp.pef", "--input", "x=nofile.npy", want_rc=1, needle="cannot read input file 'nofile.npy'")
    sambaflow("run", "mlp.pef", "--input", "x=bad.npy", want_rc=1, needle="input file 'bad.npy'")
    sambaflow("run", "mlp.pef", "--input", "x", want_rc=1, needle="is not NAME=FILE.npy")

    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
