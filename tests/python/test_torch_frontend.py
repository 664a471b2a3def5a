"""The torch front end as models use it: SambaTensor.dtype is a torch.dtype,
torch.Tensor's flags and device, expand with sizes, in-place ops on integer
buffers, torch.no_grad, train/eval, torch's composites and decompositions for
functions Samba does not map, and the error for those it cannot run."""
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import sambaflow.samba as samba  # noqa: E402


def host(t):
    return torch.from_numpy(np.array(t.numpy()))


def test_dtype_is_a_torch_dtype_and_converts_both_ways():
    x = samba.randn(2, 3)
    assert isinstance(x.dtype, torch.dtype) and x.dtype is torch.float32
    assert x.dtype == samba.float32 and x.samba_dtype == "float" and isinstance(x.samba_dtype, samba.dtype)
    assert x.long().dtype is torch.int64 and (x > 0).dtype is torch.bool
    assert torch.finfo(x.dtype).min == torch.finfo(torch.float32).min
    for dt in samba.dtypes.ALL:
        assert samba.dtypes.from_name(samba.dtypes.to_torch(dt)) == dt
        assert samba.zeros(1, dtype=dt).dtype is samba.dtypes.to_torch(dt)
    # Models build constants from a tensor's dtype and mix them in.
    mask_value = torch.full([], torch.finfo(x.dtype).min, dtype=x.dtype)
    got = torch.where(x > 0, x, mask_value)
    np.testing.assert_array_equal(got.numpy(), torch.where(host(x) > 0, host(x), mask_value).numpy())
    assert x.to(torch.device("cpu"), torch.float64).dtype is torch.float64 and x.to("cpu") is x


def test_dtype_without_torch_is_samba_dtype():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import sambaflow.samba as samba\n"
            "t = samba.zeros(2, dtype='int64')\n"
            "assert isinstance(t.dtype, samba.dtype) and t.dtype == samba.int64, t.dtype\n"
            "t.add_(1)\n"
            "assert t.tolist() == [1, 1]\n")
    env = dict(os.environ)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_torch_tensor_flags_device_and_membership():
    x = samba.from_numpy(np.arange(6, dtype=np.int64).reshape(2, 3))
    assert x.is_nested is False and x.is_sparse is False and x.is_cuda is False
    assert x.device == torch.device("cpu") and x.layout == torch.strided and x.get_device() == -1
    assert 4 in x and 7 not in x


def test_expand_with_sizes_and_minus_one():
    x = samba.randn(3, 1)
    for sizes in ((3, 4), ((3, 4),), (2, -1, 4), ([2, 3, 4],)):
        got = x.expand(*sizes)
        want = host(x).expand(*sizes)
        assert got.shape == tuple(want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(x.expand_as(samba.zeros(2, 3, 5)).numpy(), host(x).expand(2, 3, 5).numpy())
    with pytest.raises(samba.SambaError, match="-1"):
        x.expand(-1, 3, 4)


@pytest.mark.parametrize("call", [
    lambda x: x.norm(p="fro"),
    lambda x: x.norm(p="fro", dim=(0, 1)),
    lambda x: x.norm(1, 1, True),
    lambda x: x.masked_fill(x < 0, torch.tensor(-2.0)),
    lambda x: x.clone().masked_fill_(x < 0, torch.tensor(-2.0)),
    lambda x: torch.full_like(x, torch.tensor(3.0)),
    lambda x: x.sum(1, keepdim=True),
    lambda x: x.clone().tril_(-1),
], ids=["norm_fro", "norm_fro_dims", "norm_positional", "masked_fill_tensor", "masked_fill__tensor",
        "full_like_tensor", "sum_keepdim", "tril_"])
def test_methods_take_the_route_of_their_torch_functions(call):
    """x.<name>(...) accepts what torch.<name>(x, ...) does: torch's spellings (p='fro',
    a one-element tensor as fill value) go through the same mapping."""
    x = samba.randn(3, 4)
    np.testing.assert_allclose(call(x).numpy(), call(host(x)).numpy(), rtol=1e-6)


@pytest.mark.parametrize("inplace", [
    lambda y, x: y.mul_(3),
    lambda y, x: y.add_(x),
    lambda y, x: y.clamp_(min=0),
    lambda y, x: F.relu(y, inplace=True),
    lambda y, x: nn.LeakyReLU(0.1, inplace=True)(y),
], ids=["mul_", "add_", "clamp_", "relu_inplace", "leaky_relu_module_inplace"])
def test_inplace_ops_on_tensors_with_history_give_torchs_gradients(inplace):
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)

    def loss(x):
        y = x * 2
        assert inplace(y, x) is y
        return (y * y).sum()

    ours, theirs = samba.from_numpy(a).requires_grad_(), torch.tensor(a, requires_grad=True)
    got, want = loss(ours), loss(theirs)
    got.backward(), want.backward()
    assert got.item() == pytest.approx(want.item(), rel=1e-6)
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-6)


def test_inplace_op_on_a_parameter_that_requires_grad_is_refused_outside_no_grad():
    layer = samba.from_torch_model_(nn.Linear(2, 2))
    with pytest.raises(samba.SambaError, match="'weight' is a parameter that requires grad"):
        layer.weight.mul_(2)
    before = np.array(layer.weight.numpy())
    with torch.no_grad():
        layer.weight.mul_(2)
    np.testing.assert_array_equal(layer.weight.numpy(), before * 2)


def test_inplace_ops_on_int64_buffers():
    count = samba.zeros((), dtype="int64")
    count.add_(1)
    count.add_(1)
    assert count.item() == 2 and count.dtype is torch.int64
    steps = samba.from_numpy(np.array([1, 2, 3], dtype=np.int32))
    steps.mul_(3)
    assert steps.tolist() == [3, 6, 9] and steps.dtype is torch.int32
    w = samba.ones(3)
    assert w.add_(samba.ones(3), alpha=2) is w and w.tolist() == [3.0, 3.0, 3.0]


def test_no_grad_results_carry_no_history():
    x = samba.randn(2, 3)
    x.requires_grad = True
    with torch.no_grad():
        y = F.relu(x) * 2
    assert not y.requires_grad
    z = (x * 2).sum()
    assert z.requires_grad
    z.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 2.0, dtype=np.float32))


def test_train_and_eval_switch_dropout():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5))
    reference = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5))
    reference.load_state_dict(model.state_dict())
    samba.from_torch_model_(model)
    x = samba.randn(4, 16)
    model.eval()
    np.testing.assert_allclose(model(x).numpy(), reference.eval()(host(x)).detach().numpy(), atol=1e-6)
    model.train()
    dropped = model(x).numpy()
    assert (dropped == 0).mean() > 0.2  # about half the units are dropped in training


@pytest.mark.parametrize("name,fn", [
    ("hardswish (torch._decomp)", F.hardswish),
    ("elu (torch._decomp)", lambda a: F.elu(a, alpha=0.7)),
    ("addcmul (torch._decomp)", lambda a: torch.addcmul(a, a, a, value=0.5)),
    ("hardtanh (torch._refs)", lambda a: F.hardtanh(a, -0.5, 0.5)),
    ("softmin (Python composite)", lambda a: F.softmin(a, dim=1)),
    ("l1_loss (Python composite)", lambda a: F.l1_loss(a, torch.zeros(3, 4))),
    ("unbind", lambda a: torch.unbind(a, 1)[2]),
    ("true_divide", lambda a: torch.true_divide(a, 2.0)),
])
def test_unmapped_functions_run_through_torch_decompositions(name, fn):
    x = samba.randn(3, 4)
    got = fn(x)
    assert isinstance(got, samba.SambaTensor), name
    np.testing.assert_allclose(got.numpy(), fn(host(x)).numpy(), atol=1e-6)


def _model_that_calls_log1p(x):
    return torch.log1p(x.abs())


def test_unsupported_function_names_itself_its_arguments_and_the_calling_line():
    x = samba.randn(3, 4)
    line = inspect.getsourcelines(_model_that_calls_log1p)[1] + 1
    with pytest.raises(samba.SambaError) as info:
        _model_that_calls_log1p(x)
    message = str(info.value)
    assert info.value.status == "SAMBA_ERR_UNSUPPORTED"
    assert "torch.log1p" in message and "SambaTensor[3, 4] float32" in message
    assert f"{os.path.abspath(__file__)}:{line}" in message

    with pytest.raises(samba.SambaError, match=r"torch.nn.functional.mish -> torch.mish"):
        F.mish(x)


def test_float_exponent_backward_compiles_to_a_pef_that_loads(tmp_path):
    # pow's backward computes `exponent - 1` on wrapped scalars alone; the
    # compiler folds it and must store it in the dtype the graph declares
    # (GPT-2's GELU is x ** 3.0).
    class Cube(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return torch.pow(self.fc(x), 3.0).sum()

    torch.manual_seed(0)
    model = Cube()
    reference = Cube()
    reference.load_state_dict(model.state_dict())
    samba.from_torch_model_(model)
    x = samba.randn(2, 4, name="x", batch_dim=0)
    pef = samba.session.compile(model, (x,), None, name="cube", pef_path=str(tmp_path / "cube.pef"))
    outs = samba.utils.trace_graph(model, (x,), None, pef=pef)
    got = samba.session.run([x], outs, section_types=["FWD"])
    got = got[0] if isinstance(got, (list, tuple)) else got
    assert got.item() == pytest.approx(reference(host(x)).item(), rel=1e-5)


def test_matmul_bias_relu_trains_as_one_gemm_per_layer_like_torch(tmp_path):
    # `x @ w + b` then relu, written out rather than through nn.Linear: the
    # compiler runs each layer as one GEMM with the bias and relu in its
    # epilogue, and training it takes torch's steps.
    class Dense(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Parameter(torch.randn(6, 5) / 3)
            self.b1 = nn.Parameter(torch.randn(5) / 3)
            self.w2 = nn.Parameter(torch.randn(5, 3) / 3)
            self.b2 = nn.Parameter(torch.randn(3) / 3)

        def forward(self, x, y):
            h = torch.relu(x @ self.w1 + self.b1)
            return F.cross_entropy(torch.relu(self.b2 + h @ self.w2), y)

    torch.manual_seed(0)
    model, reference = Dense(), Dense()
    reference.load_state_dict(model.state_dict())
    xs = np.random.default_rng(0).standard_normal((8, 6)).astype(np.float32)
    ys = np.array([0, 2, 1, 1, 0, 2, 2, 1], dtype=np.int64)
    samba.from_torch_model_(model)
    x, y = samba.from_numpy(xs, name="x"), samba.from_numpy(ys, name="y")
    opt = samba.optim.SGD(model.parameters(), lr=0.5)
    pef = samba.session.compile(model, (x, y), opt, name="dense", pef_path=str(tmp_path / "dense.pef"))
    log = open(pef + ".log").read()
    fused = [line for line in log.splitlines()
             if line.strip().startswith("linear(") and "activation='relu'" in line]
    assert len(fused) == 2, log
    outs = samba.utils.trace_graph(model, (x, y), opt, pef=pef)
    losses = [samba.session.run([x, y], outs)[0].item() for _ in range(4)]

    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.5)
    ref_losses = []
    for _ in range(4):
        ref_opt.zero_grad()
        loss = reference(torch.from_numpy(xs), torch.from_numpy(ys))
        loss.backward()
        ref_opt.step()
        ref_losses.append(loss.item())
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    np.testing.assert_allclose(model.w1.sn_data.numpy(), reference.w1.detach().numpy(), rtol=1e-5, atol=1e-6)
