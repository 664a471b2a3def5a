"""samba.optim against the op registry and against PyTorch: the classes'
hyperparameter names and defaults and docs/user-guide.md's table agree with
samba_optimizer_schema_json; SGD with max_grad_norm, compiled and eager,
takes the steps torch.nn.utils.clip_grad_norm_ + torch.optim.SGD take, and
AdamW's steps round as torch.optim.AdamW's."""
import inspect
import os

import numpy as np
import pytest

import sambaflow.samba as samba
import sambaflow.samba.utils as utils
from sambaflow.samba import optim

GUIDE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "user-guide.md")
CLASSES = {"sgd": optim.SGD, "adamw": optim.AdamW}


def schema_names(kind):
    return [h["name"] for h in optim.hyperparameters(kind)]


@pytest.mark.parametrize("kind", CLASSES)
def test_classes_name_every_hyperparameter_and_restate_no_default(kind):
    cls = CLASSES[kind]
    args = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name not in ("self", "params")]
    names = [p.name for p in args if p.name != "betas"]  # betas: PyTorch's spelling of beta1, beta2
    assert sorted(names) == sorted(schema_names(kind))
    assert all(p.default is None for p in args), "defaults come from the registry"
    w = samba.from_numpy(np.ones(3, dtype=np.float32)).requires_grad_()
    assert cls([w]).defaults == {h["name"]: h["default"] for h in optim.hyperparameters(kind)}


def test_adamw_takes_pytorch_betas_as_beta1_beta2():
    w = samba.from_numpy(np.ones(3, dtype=np.float32)).requires_grad_()
    opt = optim.AdamW([w], betas=(0.5, 0.75))
    assert opt.defaults["beta1"] == 0.5 and opt.defaults["beta2"] == 0.75


def range_text(r):
    if r is None:
        return ""
    lo, hi = r["min"], r["max"]
    if lo is not None and hi is not None:
        return "in {}{:g}, {:g}{}".format("(" if r["min_open"] else "[", lo, hi, ")" if r["max_open"] else "]")
    if lo is not None:
        return "{} {:g}".format(">" if r["min_open"] else ">=", lo)
    return "{} {:g}".format("<" if r["max_open"] else "<=", hi)


def guide_rows():
    rows = []
    with open(GUIDE) as f:
        lines = f.read().split("<!-- optimizer hyperparameters:", 1)[1].splitlines()[1:]
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_user_guide_table_matches_the_registry():
    rows = guide_rows()
    want = [(k, h) for k in CLASSES for h in optim.hyperparameters(k)]
    assert [(r[0], r[1]) for r in rows] == [(k, h["name"]) for k, h in want]
    for (kind, name, typ, default, valid, argin), (_, h) in zip(rows, want):
        where = "{} {}".format(kind, name)
        assert typ == h["type"], where
        if h["default"] is None:
            assert default.startswith("none"), where
        elif isinstance(h["default"], bool):
            assert default == str(h["default"]).lower(), where
        else:
            assert float(default) == h["default"], where
        assert valid == range_text(h["range"]), where
        assert argin == ("yes" if h["argin"] else "no"), where


RUN_H = os.path.join(os.path.dirname(__file__), "..", "..", "include", "samba", "run.h")


def test_run_h_ranges_match_the_registry():
    """The range list in samba/run.h ("lr, momentum ...   >= 0") states each
    argin hyperparameter's schema range, and dropout p's."""
    with open(RUN_H) as f:
        block = f.read().split("/* Argin values.", 1)[1].split("*/", 1)[0]
    stated = {}
    for line in block.splitlines():
        parts = line.lstrip(" *").split("   ")
        if len(parts) > 1 and parts[0]:
            for name in parts[0].split(","):
                stated[name.strip()] = parts[-1].strip()
    for kind in CLASSES:
        for h in optim.hyperparameters(kind):
            if h["argin"]:
                assert stated.get(h["name"]) == range_text(h["range"]), (kind, h["name"])
    [p] = [a for a in samba.op_schema("dropout")["attrs"] if a["name"] == "p"]
    assert stated["dropout rates (dropout_3.p)"].startswith(range_text(p["range"]))


class Net:
    def __init__(self, prefix):
        self.w = samba.parameter(prefix + ".weight", (3, 4))
        self.b = samba.parameter(prefix + ".bias", (3,), materializer="zeros")

    def parameters(self):
        return [self.w, self.b]

    def __call__(self, x, y):
        return (samba.cross_entropy(samba.linear(x, self.w, self.b), y),)


def data(n=12, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0).astype(np.int64)
    return x, y


HYPER = dict(lr=0.5, momentum=0.9, max_grad_norm=0.2)
STEPS = 4


def torch_steps(torch, w0, b0, x, y):
    """The PyTorch reference: the weights and losses after each step."""
    F = torch.nn.functional
    w = torch.tensor(w0, requires_grad=True)
    b = torch.tensor(b0, requires_grad=True)
    opt = torch.optim.SGD([w, b], lr=HYPER["lr"], momentum=HYPER["momentum"])
    losses, norms = [], []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(F.linear(torch.tensor(x), w, b), torch.tensor(y))
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_([w, b], HYPER["max_grad_norm"])))
        opt.step()
        losses.append(loss.item())
    assert min(norms) > HYPER["max_grad_norm"], "every step clips"
    return w.detach().numpy(), b.detach().numpy(), losses


def test_compiled_sgd_with_max_grad_norm_matches_pytorch(tmp_path):
    torch = pytest.importorskip("torch")
    model = Net("clip")
    xs, ys = data()
    x, y = samba.from_numpy(xs, name="x"), samba.from_numpy(ys, name="y")
    opt = optim.SGD(model.parameters(), **HYPER)
    s = samba.session
    pef = s.compile(model, (x, y), opt, name="clip", pef_path=str(tmp_path / "clip.pef"))
    outs = utils.trace_graph(model, (x, y), opt, pef=pef)
    assert "GRADNORM" in s.get_section_types() and "max_grad_norm" in s.get_argin_names()
    w0, b0 = model.w.sn_data.numpy().copy(), model.b.sn_data.numpy().copy()
    losses = [s.run([x, y], outs)[0].item() for _ in range(STEPS)]
    w_ref, b_ref, loss_ref = torch_steps(torch, w0, b0, xs, ys)
    np.testing.assert_allclose(losses, loss_ref, rtol=1e-5)
    np.testing.assert_allclose(model.w.sn_data.numpy(), w_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.b.sn_data.numpy(), b_ref, rtol=1e-5, atol=1e-6)


def test_eager_sgd_with_max_grad_norm_matches_pytorch():
    torch = pytest.importorskip("torch")
    xs, ys = data(seed=1)
    rng = np.random.default_rng(2)
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    b0 = np.zeros(3, dtype=np.float32)
    w = samba.from_numpy(w0.copy()).requires_grad_()
    b = samba.from_numpy(b0.copy()).requires_grad_()
    opt = optim.SGD([w, b], **HYPER)
    x, y = samba.from_numpy(xs), samba.from_numpy(ys)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = samba.cross_entropy(samba.linear(x, w, b), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    w_ref, b_ref, loss_ref = torch_steps(torch, w0, b0, xs, ys)
    np.testing.assert_allclose(losses, loss_ref, rtol=1e-5)
    np.testing.assert_allclose(w.numpy(), w_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.numpy(), b_ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(4, 8), (3, 1001)])
def test_eager_adamw_steps_round_like_pytorch(shape):
    """Steps of size lr from parameters at 0 show the update's relative error:
    1 - beta2 computed in float32 (1.3e-5 off for 0.999) moved each by 6.5e-6.
    3 x 1001 elements cross the update's vector chunks and end mid-vector."""
    torch = pytest.importorskip("torch")
    grads = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    hyper = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}
    w = samba.zeros(*shape).requires_grad_()
    ref = torch.zeros(*shape, requires_grad=True)
    opt, ref_opt = optim.AdamW([w], **hyper), torch.optim.AdamW([ref], **hyper)
    for step in range(3):
        g = grads * (step + 1)
        opt.zero_grad()
        (w * samba.from_numpy(g)).sum().backward()
        opt.step()
        ref_opt.zero_grad()
        (ref * torch.from_numpy(g)).sum().backward()
        ref_opt.step()
        np.testing.assert_allclose(w.numpy(), ref.detach().numpy(), rtol=1e-6, atol=0)
