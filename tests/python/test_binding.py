"""The Python binding over libsamba: tensors and numpy sharing, generated
ops, operators, indexing, autograd, errors, lazy parameters, pinned memory,
DLPack, and compile / trace_graph / run of a small classifier."""
import os
import subprocess
import sys

import numpy as np
import pytest

import sambaflow.samba as samba
from sambaflow.samba import SambaError


def test_numpy_round_trip_shares_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = samba.from_numpy(a)
    assert t.shape == (3, 4) and t.dtype == samba.dtypes.float32
    b = np.asarray(t)
    assert b.ctypes.data == a.ctypes.data
    a[0, 0] = 42
    assert t[0, 0].item() == 42
    strided = samba.from_numpy(a[:, ::2])
    assert strided.stride() == (4, 2)
    np.testing.assert_array_equal(strided.numpy(), a[:, ::2])


def test_isa_name_is_forced_by_the_environment():
    assert samba.isa_name() in ("generic", "avx2", "avx512", "avx512_bf16")
    # Chosen once per process: a fresh interpreter with SAMBA_ISA=generic runs generic.
    env = dict(os.environ, SAMBA_ISA="generic")
    out = subprocess.run([sys.executable, "-c", "import sambaflow.samba as s; print(s.isa_name())"],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "generic"


def test_generated_ops_and_operators():
    assert "layer_norm" in samba.op_names() and len(samba.op_names()) > 100
    assert "normalized_shape" in samba.layer_norm.__doc__
    x = samba.from_numpy(np.array([[1.0, -2.0], [3.0, -4.0]], dtype=np.float32))
    np.testing.assert_array_equal((x * 2 + 1).numpy(), [[3, -3], [7, -7]])
    np.testing.assert_array_equal((1 - x).numpy(), [[0, 3], [-2, 5]])
    np.testing.assert_array_equal(samba.relu(x).numpy(), [[1, 0], [3, 0]])
    np.testing.assert_array_equal(x.relu().numpy(), [[1, 0], [3, 0]])
    np.testing.assert_allclose((x @ x).numpy(), np.array([[1, -2], [3, -4]]) @ np.array([[1, -2], [3, -4]]))
    assert (x > 0).dtype == samba.dtypes.bool_
    np.testing.assert_allclose(samba.sum(x, dim=[1]).numpy(), [-1, -1])
    np.testing.assert_allclose(x.reshape(4).numpy(), [1, -2, 3, -4])
    np.testing.assert_allclose(x.T.numpy(), [[1, 3], [-2, -4]])
    assert x.long().dtype == samba.dtypes.int64
    assert x.new_zeros((3,)).shape == (3,)


def test_indexing_get_and_set():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = samba.from_numpy(a.copy())
    np.testing.assert_array_equal(t[1, :, ::2].numpy(), a[1, :, ::2])
    np.testing.assert_array_equal(t[None, ..., 1].numpy(), a[None, ..., 1])
    np.testing.assert_array_equal(t[:, [0, 2]].numpy(), a[:, [0, 2]])
    t[0, 0] = 5.0
    assert t[0, 0, 3].item() == 5.0


def test_autograd_matches_the_analytic_gradient():
    w = samba.from_numpy(np.array([1.0, 2.0, 3.0], dtype=np.float32)).requires_grad_()
    loss = samba.sum(w * w)
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), [2, 4, 6])


def test_errors_carry_the_status_and_message():
    x = samba.zeros(2, 3)
    with pytest.raises(SambaError) as e:
        samba.matmul(x, x)
    assert e.value.status == "SAMBA_ERR_SHAPE_MISMATCH"
    assert "matmul" in str(e.value)
    with pytest.raises(TypeError, match="no attribute 'bogus'"):
        samba.sum(x, bogus=1)


def test_random_tensors_are_new_each_draw_and_repeat_after_reset():
    samba.session.reset_random_generator()
    a = samba.randn(100).numpy().copy()
    b = samba.randn(100).numpy().copy()
    assert not np.array_equal(a, b)
    samba.session.reset_random_generator()
    np.testing.assert_array_equal(samba.randn(100).numpy(), a)
    assert abs(a.mean()) < 0.5


def test_lazy_parameters():
    s = samba.session
    eager = samba.parameter("lazy.w", (32, 16)).numpy().copy()
    s.enable_lazy_param(init_threads=3)
    try:
        assert s.use_lazy_param()
        w = samba.parameter("lazy.w", (32, 16))
        assert not w.has_data()
        assert w.materializer.kind == "linear_weight"
        w.materialize_()
        np.testing.assert_array_equal(w.numpy(), eager)

        def fill(t, rng):
            rng.normal(t, 5.0, 0.1)

        c = samba.parameter("lazy.custom", (64,), materializer=fill)
        assert abs(c.numpy().mean() - 5.0) < 0.1
        with pytest.raises(ValueError):
            s.enable_lazy_param(fp32_to_bf16_rounding="up")
    finally:
        s.disable_lazy_param()
    assert not s.use_lazy_param()


def test_pinned_memory_and_fast_access():
    s = samba.session
    s.enable_pinned_memory()
    try:
        assert s.use_pinned_memory()
        t = samba.randn(256, name="pinned.x")
        before = t.data_ptr()
        t.fast_access = True
        assert t.fast_access and t.data_ptr() != before
        assert samba.SambaTensor.is_fast_access("pinned.x")
        assert t.reusable()
    finally:
        s.disable_pinned_memory()


def test_dlpack_round_trip_with_torch():
    torch = pytest.importorskip("torch")
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = samba.from_dlpack(a)
    assert t.data_ptr() == a.data_ptr()
    back = torch.utils.dlpack.from_dlpack(t.__dlpack__())
    assert back.data_ptr() == a.data_ptr()
    assert back.tolist() == a.tolist()


class Classifier:
    """logits = x @ w.T + b, loss = cross_entropy(logits, y)."""

    def __init__(self):
        self.w = samba.parameter("fc.weight", (3, 4))
        self.b = samba.parameter("fc.bias", (3,), materializer="zeros")

    def __call__(self, x, y):
        logits = samba.linear(x, self.w, self.b)
        return samba.cross_entropy(logits, y), logits


def batch():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((12, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0).astype(np.int64)
    return samba.from_numpy(x, name="x"), samba.from_numpy(y, name="y")


def test_compile_trace_graph_and_run(tmp_path):
    s = samba.session  # sn_data and sn_grad read the default session
    model = Classifier()
    x, y = batch()
    opt = samba.optim.SGD([model.w, model.b], lr=0.5, momentum=0.9)
    pef = s.compile(model, [x, y], opt, name="py_clf", pef_path=str(tmp_path / "clf.pef"))
    assert os.path.exists(pef) and os.path.exists(pef + ".log")
    outs = s.trace_graph(model, [x, y], opt, pef_path=pef)
    assert len(outs) == 2
    assert s.get_section_types() == ["FWD", "BCKWD", "OPT"]
    assert set(s.get_weight_names()) == {"fc.weight", "fc.bias"}
    assert "lr" in s.get_argin_names()

    # FWD only leaves the weights alone.
    w0 = model.w.sn_data.numpy().copy()
    loss0 = s.run([x, y], outs, section_types=["FWD"])[0].item()
    np.testing.assert_array_equal(model.w.sn_data.numpy(), w0)
    # Training lowers the loss; lr = 0 persists across runs.
    losses = [s.run([x, y], outs)[0].item() for _ in range(30)]
    assert losses[-1] < 0.5 * loss0
    s.run([x, y], outs, hyperparam_dict={"lr": 0.0, "momentum": 0.0})
    w1 = model.w.sn_data.numpy().copy()
    s.run([x, y], outs)
    np.testing.assert_array_equal(model.w.sn_data.numpy(), w1)
    # The grad_of_outputs pattern: logits' gradient from the host.
    g = samba.from_numpy(np.ones((12, 3), dtype=np.float32) / 12)
    s.run([x, y], outs, section_types=["FWD", "BCKWD"], grad_of_outputs=[None, g])
    assert model.w.sn_grad.shape == (3, 4)
    # Both section types and ids is an error.
    with pytest.raises(SambaError, match="section"):
        s.run([x, y], outs, section_types=["FWD"], section_ids=[0])
    perf = s.measure_performance([x, y], iterations=3, warmup=1)
    assert perf["iterations"] == 3 and perf["samples_per_second"] > 0


def test_a_failing_model_reports_its_exception(tmp_path):
    s = samba.SambaSession()
    x, y = batch()

    def broken(x, y):
        raise KeyError("no such layer")

    with pytest.raises(SambaError, match="no such layer"):
        s.compile(broken, [x, y], name="broken", pef_path=str(tmp_path / "b.pef"))
