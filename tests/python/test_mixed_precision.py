"""Mixed precision from the user's side: session.compile(mixed_precision="bf16")
and the apps' --mixed-precision flag. The loss and gradients of a small net
agree with torch.autocast('cpu', dtype=torch.bfloat16) to bf16 precision,
the parameters stay fp32, the seed's ResFFNLogReg app trains to the accuracy
of its fp32 compile, and unknown modes are refused with a message."""
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

import sambaflow.samba as samba
import sambaflow.samba.utils as utils
from sambaflow.samba._lib import Owned, SambaError, call
from sambaflow.samba.utils.common import parse_app_args

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
APP = os.path.join(ROOT, "examples", "python", "resffn_logreg.py")
DATA = os.path.join(ROOT, "examples", "data", "digits.csv.gz")


class Mlp:
    """linear, relu, linear, cross_entropy: the autocast comparison's model."""

    def __init__(self, prefix):
        self.w1 = samba.parameter(prefix + ".w1", (32, 16))
        self.b1 = samba.parameter(prefix + ".b1", (32,), materializer="linear_bias", fan_in=16)
        self.w2 = samba.parameter(prefix + ".w2", (5, 32))
        self.b2 = samba.parameter(prefix + ".b2", (5,), materializer="linear_bias", fan_in=32)

    def parameters(self):
        return [self.w1, self.b1, self.w2, self.b2]

    def __call__(self, x, y):
        h = samba.relu(samba.linear(x, self.w1, self.b1))
        return (samba.cross_entropy(samba.linear(h, self.w2, self.b2), y),)


def batch(n=64, seed=3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 16)).astype(np.float32)
    y = rng.integers(0, 5, n).astype(np.int64)
    return x, y


def samba_loss_and_grads(tmp_path, mode):
    model = Mlp(f"mlp_{mode}")
    xs, ys = batch()
    x, y = samba.from_numpy(xs, name="x"), samba.from_numpy(ys, name="y")
    opt = samba.optim.SGD(model.parameters(), lr=0.0)
    pef = samba.session.compile(model, (x, y), opt, name=f"mlp_{mode}", pef_path=str(tmp_path / f"{mode}.pef"),
                                mixed_precision=mode)
    outs = utils.trace_graph(model, (x, y), opt, pef=pef)
    loss = samba.session.run([x, y], outs, section_types=["FWD", "BCKWD"])[0].item()
    weights = [p.sn_data.numpy().copy() for p in model.parameters()]
    grads = [p.sn_grad.numpy().copy() for p in model.parameters()]
    return pef, loss, weights, grads, xs, ys


def torch_loss_and_grads(torch, weights, xs, ys, autocast):
    F = torch.nn.functional
    w1, b1, w2, b2 = (torch.tensor(w, requires_grad=True) for w in weights)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits = F.linear(F.relu(F.linear(torch.tensor(xs), w1, b1)), w2, b2)
        loss = F.cross_entropy(logits, torch.tensor(ys))
    loss.backward()
    return loss.item(), [p.grad.float().numpy() for p in (w1, b1, w2, b2)]


def test_loss_and_gradients_match_torch_autocast(tmp_path):
    torch = pytest.importorskip("torch")
    pef, loss, weights, grads, xs, ys = samba_loss_and_grads(tmp_path, "bf16")
    with open(pef + ".log") as f:
        assert "mixed precision bf16" in f.read()
    ref_loss, ref_grads = torch_loss_and_grads(torch, weights, xs, ys, autocast=True)
    fp32_loss, fp32_grads = torch_loss_and_grads(torch, weights, xs, ys, autocast=False)
    # bf16 tolerance: closer to autocast's numbers than fp32's are (by half
    # their distance), as both round the same operands to bf16 and
    # accumulate in fp32; the fp32 compile fails this.
    assert abs(loss - ref_loss) <= 0.5 * abs(fp32_loss - ref_loss) + 1e-6
    for name, g, ref, ref32 in zip(("w1", "b1", "w2", "b2"), grads, ref_grads, fp32_grads):
        assert g.dtype == np.float32, name  # gradients of fp32 master weights
        assert np.abs(g - ref).max() <= 0.5 * np.abs(ref32 - ref).max(), name


def test_parameters_stay_float32_and_fp32_compile_is_unchanged(tmp_path):
    _, loss_bf16, weights, grads, _, _ = samba_loss_and_grads(tmp_path, "bf16")
    assert all(w.dtype == np.float32 for w in weights) and all(g.dtype == np.float32 for g in grads)
    pef, _, _, _, _, _ = samba_loss_and_grads(tmp_path, "none")
    with open(pef + ".log") as f:
        assert "mixed precision none" in f.read()


def test_unknown_modes_are_refused_with_a_message(tmp_path):
    model = Mlp("bad")
    xs, ys = batch()
    x, y = samba.from_numpy(xs, name="x"), samba.from_numpy(ys, name="y")
    with pytest.raises(ValueError, match="'fp16' is not supported; expected 'none' or 'bf16'"):
        samba.session.compile(model, (x, y), None, inference=True, name="bad", pef_path=str(tmp_path / "b.pef"),
                              mixed_precision="fp16")
    assert not os.path.exists(tmp_path / "b.pef")
    # The C interface itself, as any binding calls it.
    with Owned("compile_options") as co:
        with pytest.raises(SambaError) as e:
            call("samba_compile_options_set_mixed_precision", co, b"float8")
        assert e.value.status == "SAMBA_ERR_INVALID_ARGUMENT" and "'float8' is not supported" in e.value.message
        with pytest.raises(SambaError) as e:
            call("samba_compile_options_set_mixed_precision", co, ctypes.c_char_p(None))
        assert e.value.status == "SAMBA_ERR_NULL_POINTER"
        call("samba_compile_options_set_mixed_precision", co, b"mp1")  # SambaFlow's GraphAMP preset
    # The apps' command line.
    assert parse_app_args(["compile", "--mixed-precision", "bf16"]).mixed_precision == "bf16"
    assert parse_app_args(["compile", "--graphamp-preset", "mp1"]).mixed_precision == "mp1"
    assert parse_app_args(["compile"]).mixed_precision == "none"
    with pytest.raises(SystemExit):
        parse_app_args(["compile", "--mixed-precision", "fp16"])


def test_disable_graphamp_compiles_in_fp32(tmp_path):
    model = Mlp("off")
    xs, ys = batch()
    x, y = samba.from_numpy(xs, name="x"), samba.from_numpy(ys, name="y")
    with samba.session.disable_graphamp():
        pef = samba.session.compile(model, (x, y), None, inference=True, name="off",
                                    pef_path=str(tmp_path / "off.pef"), mixed_precision="bf16")
    with open(pef + ".log") as f:
        assert "mixed precision none" in f.read()


def app(*argv):
    r = subprocess.run([sys.executable, APP, *argv], capture_output=True, text=True, env=os.environ.copy())
    assert r.returncode == 0, f"{argv}: {r.stdout}\n{r.stderr}"
    return r.stdout


def train_app(tmp_path, mode, epochs):
    pef = str(tmp_path / mode / "resffn.pef")
    app("compile", "-b", "64", "-p", pef, "--mixed-precision", mode)
    dump = str(tmp_path / f"{mode}.jsonl")
    out = app("run", "-b", "64", "-p", pef, "--data", DATA, "--epochs", str(epochs), "--dump-losses", dump)
    accuracy = float(out.rsplit("held-out accuracy:", 1)[1].split("%")[0])
    with open(dump) as f:
        losses = [float(line.split('"loss": ')[1].rstrip("}\n")) for line in f]
    with open(pef + ".log") as f:
        log = f.read()
    return accuracy, losses, log


def test_resffn_app_trains_in_bf16_to_the_accuracy_of_fp32(tmp_path):
    pytest.importorskip("torch")
    epochs = 6
    acc32, losses32, log32 = train_app(tmp_path, "none", epochs)
    acc16, losses16, log16 = train_app(tmp_path, "bf16", epochs)
    assert "mixed precision bf16" in log16 and "mixed precision none" in log32
    assert acc32 >= 90.0  # the task is learnt, so the comparison says something
    # Stated tolerance: held-out accuracy within two points, the mean loss of
    # the last epoch within 0.05.
    assert abs(acc16 - acc32) <= 2.0, (acc16, acc32)
    per_epoch = len(losses32) // epochs
    last32, last16 = np.mean(losses32[-per_epoch:]), np.mean(losses16[-per_epoch:])
    assert abs(last16 - last32) <= 0.05, (last16, last32)
    assert losses16 != losses32  # the bf16 run computed in bf16
