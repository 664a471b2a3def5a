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


def autocast_emulated_loss_and_grads(torch, weights, xs, ys):
    """What torch.autocast('cpu', bfloat16) computes, written out: each
    linear takes its operands rounded to bf16, sums their products exactly
    (float64, so no summation order enters) and rounds the result to bf16,
    in the forward and in both products of its backward; relu runs on bf16
    values, cross_entropy in fp32 on the logits cast up, and its gradient is
    rounded to bf16 where the cast takes it back down. This is the reference,
    not torch's own autocast: on CPUs without AVX512_BF16, torch 1.13's bf16
    matmul sums in bf16 (errors of several units in the result) instead of in
    fp32 as the device and autocast on other CPUs do."""
    F = torch.nn.functional

    def bf16(t):
        return t.to(torch.bfloat16).to(torch.float32)

    def product(a, b):
        return bf16((a.double() @ b.double()).float())

    class LinearBf16(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b):
            x, w, b = bf16(x), bf16(w), bf16(b)
            ctx.save_for_backward(x, w)
            return bf16((x.double() @ w.double().T + b.double()).float())

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            g = bf16(g)
            return product(g, w), product(g.T, x), bf16(g.double().sum(0).float())

    w1, b1, w2, b2 = (torch.tensor(w, requires_grad=True) for w in weights)
    h = F.relu(LinearBf16.apply(torch.tensor(xs), w1, b1))
    loss = F.cross_entropy(LinearBf16.apply(h, w2, b2), torch.tensor(ys))
    loss.backward()
    return loss.item(), [p.grad.numpy() for p in (w1, b1, w2, b2)]


def torch_bf16_matmul_sums_in_fp32(torch):
    """True where torch's own bf16 matmul, in the layouts a linear's backward
    uses, sums in fp32: its result is then within one bf16 rounding of the
    exact product."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 512, generator=g).to(torch.bfloat16)
    b = torch.randn(512, 32, generator=g).to(torch.bfloat16)
    exact = a.double() @ b.double()
    got = (a.T.contiguous().T @ b).double()
    return bool(((got - exact).abs() <= exact.abs() * 2.0**-8 + 1e-3).all())


def assert_closer_than_fp32(loss, grads, ref, fp32):
    """bf16 tolerance: closer to the reference than fp32's numbers are (by
    half their distance), as both round the same operands to bf16 and
    accumulate in fp32; the fp32 compile fails this."""
    (ref_loss, ref_grads), (fp32_loss, fp32_grads) = ref, fp32
    assert abs(loss - ref_loss) <= 0.5 * abs(fp32_loss - ref_loss) + 1e-6
    for name, g, r, r32 in zip(("w1", "b1", "w2", "b2"), grads, ref_grads, fp32_grads):
        assert np.abs(g - r).max() <= 0.5 * np.abs(r32 - r).max(), name


def test_loss_and_gradients_match_torch_autocast(tmp_path):
    torch = pytest.importorskip("torch")
    pef, loss, weights, grads, xs, ys = samba_loss_and_grads(tmp_path, "bf16")
    with open(pef + ".log") as f:
        assert "mixed precision bf16" in f.read()
    assert all(g.dtype == np.float32 for g in grads)  # gradients of fp32 master weights
    fp32 = torch_loss_and_grads(torch, weights, xs, ys, autocast=False)
    emulated = autocast_emulated_loss_and_grads(torch, weights, xs, ys)
    assert_closer_than_fp32(loss, grads, emulated, fp32)
    if torch_bf16_matmul_sums_in_fp32(torch):
        # Where torch's autocast computes what it means to, it is the
        # reference too, and the emulation agrees with it.
        autocast = torch_loss_and_grads(torch, weights, xs, ys, autocast=True)
        assert_closer_than_fp32(loss, grads, autocast, fp32)
        assert_closer_than_fp32(emulated[0], emulated[1], autocast, fp32)


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
