"""Cases that used to give wrong answers with no error: micro-batched
training with a section list without ZEROGRAD, max/min along a dim,
materializers that return their values, and multigraph runs."""
import numpy as np
import pytest

import samba
import samba.utils as utils
from samba import SambaError

torch = pytest.importorskip("torch")


class Net:
    def __init__(self, prefix, w=None):
        self.w = samba.parameter(prefix + ".weight", (3, 4))
        self.b = samba.parameter(prefix + ".bias", (3,), materializer="zeros")
        if w is not None:
            self.w.data = w

    def parameters(self):
        return [self.w, self.b]

    def __call__(self, x, y):
        logits = samba.linear(x, self.w, self.b)
        return samba.cross_entropy(logits, y), logits


def data(n=8, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0).astype(np.int64)
    return x, y


def test_micro_batched_loop_with_fwd_bckwd_opt_matches_torch(tmp_path):
    x, y = data()
    w0 = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32) * 0.3
    model = Net("mb", w0)
    sx, sy = samba.from_numpy(x, name="x"), samba.from_numpy(y, name="y")
    opt = samba.optim.SGD(model.parameters(), lr=0.5)
    pef = samba.session.compile(model, (sx, sy), opt, name="mb", pef_path=str(tmp_path / "mb.pef"),
                                batch_size=8, micro_batch_size=2)
    utils.trace_graph(model, (sx, sy), opt, pef=pef)
    assert "ZEROGRAD" in samba.session.get_section_types()

    tw = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    tb = torch.nn.Parameter(torch.zeros(3))
    topt = torch.optim.SGD([tw, tb], lr=0.5)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    for _ in range(6):
        loss, _ = samba.session.run([sx, sy], section_types=["fwd", "bckwd", "opt"])
        topt.zero_grad()
        want = torch.nn.functional.cross_entropy(torch.nn.functional.linear(tx, tw, tb), ty)
        want.backward()
        topt.step()
    np.testing.assert_allclose(model.w.sn_data.numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_along_dim_return_values_and_indices(name):
    a = np.array([[1.0, 5.0, 3.0], [7.0, 2.0, 9.0]], dtype=np.float32)
    x = samba.from_numpy(a)
    want = getattr(torch.from_numpy(a), name)(1)
    for got in (getattr(x, name)(1), getattr(torch, name)(x, dim=1)):
        v, i = got
        np.testing.assert_array_equal(v.numpy(), want.values.numpy())
        np.testing.assert_array_equal(i.numpy(), want.indices.numpy())
        assert got.values is v and got.indices is i
    kept = getattr(x, name)(0, keepdim=True)
    assert kept.values.shape == (1, 3) and kept.indices.shape == (1, 3)
    assert getattr(x, name)().item() == getattr(torch.from_numpy(a), name)().item()
    with pytest.raises(SambaError, match="mode"):
        x.mode(1)


def test_materializer_returning_values_sets_the_parameter(tmp_path):
    values = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 10

    class Model(Net):
        def __init__(self):
            self.w = samba.parameter("mat.weight", (3, 4), materializer=lambda t, rng: values)
            self.b = samba.parameter("mat.bias", (3,), materializer="zeros")

    s = samba.session
    s.enable_lazy_param()
    try:
        model = Model()
        x, y = data()
        sx, sy = samba.from_numpy(x, name="x"), samba.from_numpy(y, name="y")
        opt = samba.optim.SGD(model.parameters(), lr=0.1)
        pef = s.compile(model, (sx, sy), opt, name="mat", pef_path=str(tmp_path / "mat.pef"))
        utils.trace_graph(model, (sx, sy), opt, pef=pef)
        np.testing.assert_array_equal(model.w.sn_data.numpy(), values.numpy())
        with pytest.raises(Exception, match="shape"):
            samba.parameter("mat.bad", (2,), materializer=lambda t, rng: values).materialize_()
    finally:
        s.disable_lazy_param()


def test_multigraph_runs_only_the_named_graph_and_refuses_name_clashes(tmp_path):
    x, y = data()
    sx, sy = samba.from_numpy(x, name="x"), samba.from_numpy(y, name="y")
    model = Net("mg")
    s = samba.SambaSession()
    s.add_graph(samba.SambaGraph("train", model, (sx, sy), samba.optim.SGD(model.parameters(), lr=0.5)))
    s.add_graph(samba.SambaGraph("eval", model, (sx, sy), inference=True))
    pef = s.compile_multigraph("mg", pef_path=str(tmp_path / "mg.pef"))
    s.init_multigraph_runtime(pef)
    s.trace_multigraph(model)
    def device_weight():
        [w] = s.get_tensors_by_name(["mg.weight"])
        return w.numpy().copy()

    w0 = device_weight()
    with pytest.raises(SambaError, match="graph_name"):
        s.run([sx, sy])
    s.run([sx, sy], graph_name="eval")
    np.testing.assert_array_equal(device_weight(), w0)  # evaluating does not train
    s.run([sx, sy], graph_name="train")
    assert not np.array_equal(device_weight(), w0)

    other = samba.SambaSession()
    a, b = Net("same"), Net("same")
    other.add_graph(samba.SambaGraph("a", a, (sx, sy), inference=True))
    other.add_graph(samba.SambaGraph("b", b, (sx, sy), inference=True))
    with pytest.raises(SambaError, match="different tensors"):
        other.compile_multigraph("clash", pef_path=str(tmp_path / "clash.pef"))
