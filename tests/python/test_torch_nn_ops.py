"""The torch functions real models call beyond the basic layers, each on
SambaTensors against torch itself (forward and gradients), and BatchNorm
models converted with from_torch_model_: eager, compiled inference and
compiled AdamW training match PyTorch, running statistics and
num_batches_tracked included."""
import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import sambaflow.samba as samba  # noqa: E402
import sambaflow.samba.utils as utils  # noqa: E402


def host(t):
    return torch.from_numpy(np.array(t.numpy()))


def leaf(array):
    return samba.from_numpy(np.array(array, dtype=np.float32)).requires_grad_()


def check_against_torch(fn, *arrays, atol=1e-5, constants=()):
    """fn on SambaTensors and on torch tensors: equal results and, through a
    weighted sum of the result, equal gradients for every float input but
    those at the indices `constants`."""
    rng = np.random.default_rng(7)
    differentiable = [a.dtype == np.float32 and i not in constants for i, a in enumerate(arrays)]
    ours = [leaf(a) if d else samba.from_numpy(a) for a, d in zip(arrays, differentiable)]
    theirs = [torch.tensor(a, requires_grad=d) for a, d in zip(arrays, differentiable)]
    got, want = fn(*ours), fn(*theirs)
    assert isinstance(got, samba.SambaTensor)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, atol=atol)
    weights = rng.standard_normal(tuple(want.shape)).astype(np.float32)
    (got * samba.from_numpy(weights)).sum().backward()
    (want * torch.from_numpy(weights)).sum().backward()
    for o, t in zip(ours, theirs):
        if t.grad is None:  # an input the result does not depend on
            assert o.grad is None
        elif t.requires_grad:
            np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=atol)


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("call", [
    lambda x: torch.norm(x),
    lambda x: torch.norm(x, dim=1),
    lambda x: torch.norm(x, p="fro", dim=(1, 2), keepdim=True),
    lambda x: torch.norm(x, p=1, dim=0),
    lambda x: torch.norm(x, p=float("inf"), dim=2),
    lambda x: torch.norm(x, p=3, dim=-1, keepdim=True),
    lambda x: torch.linalg.vector_norm(x, ord=float("-inf"), dim=(0, 2)),
    lambda x: F.normalize(x),
    lambda x: F.normalize(x, p=1.0, dim=-1),
    lambda x: F.silu(x),
    lambda x: nn.SiLU()(x),
    lambda x: F.leaky_relu(x),
    lambda x: nn.LeakyReLU(0.2)(x),
    lambda x: torch.cumsum(x, dim=1),
    lambda x: torch.tril(x),
    lambda x: torch.triu(x, diagonal=1),
    lambda x: torch.tril(x, -1),
    lambda x: torch.where(x > 0, x, torch.zeros(1)),
    lambda x: torch.masked_fill(x, x < 0, -2.0),
], ids=lambda c: None)
def test_function_matches_torch_with_gradients(call):
    check_against_torch(call, randn(2, 3, 4))


def test_norm_gradient_at_zero_and_ties_matches_torch():
    x = np.array([[0.0, 0.0, 0.0], [2.0, -2.0, 1.0]], dtype=np.float32)
    check_against_torch(lambda t: torch.norm(t, dim=1), x)
    check_against_torch(lambda t: torch.norm(t, p=float("inf"), dim=1), x)
    check_against_torch(lambda t: F.normalize(t, dim=1), x)


def test_norm_refuses_the_nuclear_norm_by_name():
    with pytest.raises(samba.SambaError, match="nuc"):
        torch.norm(samba.randn(3, 3), p="nuc")


@pytest.mark.parametrize("kwargs", [
    {},
    {"reduction": "sum"},
    {"reduction": "none"},
    {"weight": "w"},
    {"pos_weight": "pw"},
    {"weight": "w", "pos_weight": "pw", "reduction": "sum"},
])
def test_binary_cross_entropy_with_logits_matches_torch(kwargs):
    logits, target = randn(4, 3), np.random.default_rng(1).uniform(size=(4, 3)).astype(np.float32)
    w, pw = np.abs(randn(3, seed=2)) + 0.5, np.abs(randn(3, seed=3)) + 0.5

    def loss(x, t, weight, pos_weight):
        given = {"weight": weight, "pos_weight": pos_weight}
        return F.binary_cross_entropy_with_logits(x, t, **{k: given[k] if v in ("w", "pw") else v
                                                            for k, v in kwargs.items()})

    check_against_torch(loss, logits, target, w, pw, constants=(2, 3))  # torch differentiates neither
    module = nn.BCEWithLogitsLoss(pos_weight=torch.from_numpy(pw))
    got = module(samba.from_numpy(logits), samba.from_numpy(target))
    assert got.item() == pytest.approx(module(torch.from_numpy(logits), torch.from_numpy(target)).item(), rel=1e-6)


def test_like_creation_takes_shape_dtype_and_device_from_torch():
    x = samba.randn(2, 3)
    assert np.array_equal(torch.zeros_like(x).numpy(), np.zeros((2, 3), np.float32))
    ones = torch.ones_like(x, dtype=torch.int64, device="cpu")
    assert ones.numpy().dtype == np.int64 and np.array_equal(ones.numpy(), np.ones((2, 3)))
    full = torch.full_like(x, 7.5)
    assert isinstance(full, samba.SambaTensor) and np.array_equal(full.numpy(), np.full((2, 3), 7.5, np.float32))
    assert np.array_equal(torch.full_like(x, torch.tensor(2), dtype=torch.int32).numpy(), np.full((2, 3), 2))
    assert np.array_equal(samba.full((2,), 3, dtype=torch.int64, device="cpu").numpy(), [3, 3])
    assert np.array_equal(samba.arange(4, dtype=torch.float32, device="cpu").numpy(), [0, 1, 2, 3])


def test_int64_buffer_steps_in_place():
    counter = samba.from_torch_tensor(torch.tensor(4))
    counter.add_(1)
    assert counter.item() == 5
    with pytest.raises(samba.SambaError, match="whole number"):
        counter.add_(1, alpha=0.5)


# ---- BatchNorm models ------------------------------------------------------------------------

class SmallCNN(nn.Module):
    # Layers followed by a batch norm have no bias, as in ResNet: the
    # normalization cancels it, so its gradient is rounding noise that Adam
    # would turn into steps of full size.
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(6)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(6 * 4 * 4, 8, bias=False)
        self.bn_fc = nn.BatchNorm1d(8, momentum=None)  # the cumulative average
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv(x))))
        return self.head(F.relu(self.bn_fc(self.fc(torch.flatten(x, 1)))))


class WithLoss(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        logits = self.net(x)
        return F.cross_entropy(logits, y), logits


ADAMW = dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


def batches(steps, seed=3):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((4, 3, 8, 8)).astype(np.float32), rng.integers(0, 5, 4)) for _ in range(steps)]


def assert_state_matches(ours, reference, rtol=1e-4, atol=1e-5):
    theirs = reference.state_dict()
    for name, value in ours.state_dict().items():
        got = np.array(value.numpy()) if isinstance(value, samba.SambaTensor) else value.numpy()
        np.testing.assert_allclose(got, theirs[name].numpy(), rtol=rtol, atol=atol, err_msg=name)


def fresh_pair(seed=0):
    torch.manual_seed(seed)
    reference = SmallCNN()
    model = copy.deepcopy(reference)
    samba.from_torch_model_(model)
    return model, reference


def test_batch_norm_eager_train_and_eval_match_torch():
    model, reference = fresh_pair()
    for x, y in batches(3):
        got = model(samba.from_numpy(x))
        want = reference(torch.from_numpy(x))
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert_state_matches(model, reference)
    assert model.bn.num_batches_tracked.item() == 3
    model.eval(), reference.eval()
    x, _ = batches(1, seed=9)[0]
    np.testing.assert_allclose(model(samba.from_numpy(x)).numpy(), reference(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    assert model.bn.num_batches_tracked.item() == 3, "evaluation counts no batch"


@pytest.mark.parametrize("kwargs", [
    {"momentum": 0.3},
    {"momentum": None},
    {"affine": False},
    {"track_running_stats": False},
])
def test_batch_norm1d_variants_train_then_eval_match_torch(kwargs):
    torch.manual_seed(4)
    reference = nn.BatchNorm1d(3, **kwargs)
    model = samba.from_torch_model_(copy.deepcopy(reference))
    for step, train in enumerate((True, True, True, False)):
        model.train(train), reference.train(train)
        x = randn(5, 3, 2, seed=step)
        got = model(samba.from_numpy(x))
        np.testing.assert_allclose(got.numpy(), reference(torch.from_numpy(x)).detach().numpy(), rtol=1e-5,
                                   atol=1e-5)
    assert_state_matches(model, reference, rtol=1e-6, atol=1e-6)


def test_functional_batch_norm_updates_the_running_statistics_it_is_given():
    x = randn(6, 4)
    stats = [np.zeros(4, np.float32), np.ones(4, np.float32)]
    ours = [samba.from_numpy(a.copy()) for a in stats]
    theirs = [torch.from_numpy(a.copy()) for a in stats]
    w, b = np.abs(randn(4, seed=1)), randn(4, seed=2)
    for training in (True, False):
        got = F.batch_norm(samba.from_numpy(x), *ours, weight=samba.from_numpy(w), bias=samba.from_numpy(b),
                           training=training, momentum=0.25, eps=1e-3)
        want = F.batch_norm(torch.from_numpy(x), *theirs, weight=torch.from_numpy(w), bias=torch.from_numpy(b),
                            training=training, momentum=0.25, eps=1e-3)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
        for o, t in zip(ours, theirs):
            np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-6)


def test_batch_norm_gradients_match_torch():
    model, reference = fresh_pair(1)
    x, y = batches(1)[0]
    loss, _ = WithLoss(model)(samba.from_numpy(x), samba.from_numpy(y))
    loss.backward()
    want, _ = WithLoss(reference)(torch.from_numpy(x), torch.from_numpy(y))
    want.backward()
    assert loss.item() == pytest.approx(want.item(), rel=1e-5)
    for (name, p), (_, q) in zip(model.named_parameters(), reference.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def test_batch_norm_cnn_compiled_training_and_inference_match_torch(tmp_path):
    model, reference = fresh_pair(2)
    net = WithLoss(model)
    data = batches(10)
    x = samba.from_numpy(data[0][0].copy(), name="x")
    y = samba.from_numpy(data[0][1].copy(), name="y")
    opt = samba.optim.AdamW(list(net.parameters()), **ADAMW)
    s = samba.session
    pef = s.compile(net, (x, y), opt, name="bn_cnn", pef_path=str(tmp_path / "bn_cnn.pef"))
    outs = utils.trace_graph(net, (x, y), opt, pef=pef)
    losses = []
    for xs, ys in data:
        samba.to_torch(x).copy_(torch.from_numpy(xs))  # run() transfers the inputs' host values
        samba.to_torch(y).copy_(torch.from_numpy(ys))
        losses.append(s.run([x, y], outs)[0].item())
    s.to_cpu(net)

    torch_net = WithLoss(reference)
    torch_opt = torch.optim.AdamW(torch_net.parameters(), **ADAMW)
    want = []
    for xs, ys in data:
        torch_opt.zero_grad()
        loss, _ = torch_net(torch.from_numpy(xs), torch.from_numpy(ys))
        loss.backward()
        torch_opt.step()
        want.append(loss.item())
    np.testing.assert_allclose(losses, want, rtol=1e-5)
    assert_state_matches(model, reference)
    assert model.bn.num_batches_tracked.item() == 10 and model.bn_fc.num_batches_tracked.item() == 10

    model.eval(), reference.eval()
    xe = samba.from_numpy(batches(1, seed=11)[0][0], name="x")
    eager = model(xe).numpy().copy()
    pef = s.compile(model, (xe,), name="bn_cnn_eval", pef_path=str(tmp_path / "bn_cnn_eval.pef"), inference=True)
    outs = utils.trace_graph(model, (xe,), pef=pef)
    compiled = s.run([xe], outs, section_types=["FWD"])[0].numpy()
    expected = reference(torch.from_numpy(np.array(xe.numpy()))).detach().numpy()
    np.testing.assert_allclose(eager, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(compiled, expected, rtol=1e-5, atol=1e-5)
    s.to_cpu(model)
    assert_state_matches(model, reference)


def test_training_pef_evaluated_with_train_false_uses_the_running_statistics(tmp_path):
    """run(train=False) is torch's eval(): batch norms normalize with the running
    statistics and leave them (and num_batches_tracked) as they are."""
    model, reference = fresh_pair(3)
    net, torch_net = WithLoss(model), WithLoss(reference)
    data = batches(3)
    x, y = samba.from_numpy(data[0][0].copy(), name="x"), samba.from_numpy(data[0][1].copy(), name="y")
    opt = samba.optim.AdamW(list(net.parameters()), **ADAMW)
    torch_opt = torch.optim.AdamW(torch_net.parameters(), **ADAMW)
    s = samba.session
    pef = s.compile(net, (x, y), opt, name="bn_train_eval", pef_path=str(tmp_path / "bn_train_eval.pef"))
    outs = utils.trace_graph(net, (x, y), opt, pef=pef)
    for step, (xs, ys) in enumerate(data):
        samba.to_torch(x).copy_(torch.from_numpy(xs))
        samba.to_torch(y).copy_(torch.from_numpy(ys))
        losses = s.run([x, y], outs)
        torch_opt.zero_grad()
        want, _ = torch_net(torch.from_numpy(xs), torch.from_numpy(ys))
        want.backward()
        torch_opt.step()
        assert losses[0].item() == pytest.approx(want.item(), rel=1e-5)

        reference.eval()
        with torch.no_grad():
            want_loss, want_logits = torch_net(torch.from_numpy(xs), torch.from_numpy(ys))
        reference.train()
        loss, logits = s.run([x, y], outs, section_types=["FWD"], train=False)[:2]
        assert loss.item() == pytest.approx(want_loss.item(), rel=1e-5), step
        np.testing.assert_allclose(logits.numpy(), want_logits.numpy(), rtol=1e-5, atol=1e-5)
    s.to_cpu(net)
    assert_state_matches(model, reference)
    assert model.bn.num_batches_tracked.item() == 3, "evaluation runs count no batch"


def ties_and_nan(shape, seed):
    """Small integers (so windows hold ties) with a NaN, as float32."""
    x = np.random.default_rng(seed).integers(-3, 4, size=shape).astype(np.float32)
    x.flat[5] = np.nan
    return x


@pytest.mark.parametrize("kwargs", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), ceil_mode=True),
    dict(kernel_size=2, stride=1, dilation=2),
    dict(kernel_size=3, stride=2, padding=1, dilation=(1, 2), ceil_mode=True),
])
def test_max_pool2d_return_indices_matches_torch(kwargs):
    """Values, indices (ties go to the window's first maximum, NaN wins) and the
    values' gradient, as torch's CPU kernel computes them."""
    for x in (ties_and_nan((2, 3, 7, 6), 1), randn(3, 9, 8, seed=2)):
        ours, theirs = leaf(x), torch.tensor(x, requires_grad=True)
        got, got_idx = F.max_pool2d(ours, return_indices=True, **kwargs)
        want, want_idx = F.max_pool2d(theirs, return_indices=True, **kwargs)
        assert got_idx.numpy().dtype == np.int64
        np.testing.assert_array_equal(got_idx.numpy(), want_idx.numpy())
        np.testing.assert_array_equal(got.numpy(), want.detach().numpy())
        weights = randn(*want.shape, seed=3)
        (got * samba.from_numpy(weights)).sum().backward()
        (want * torch.from_numpy(weights)).sum().backward()
        np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


def test_max_pool2d_module_with_indices_traces_and_compiles(tmp_path):
    """nn.MaxPool2d(return_indices=True) in a compiled graph gives torch's pair."""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.pool = nn.MaxPool2d(3, stride=2, padding=1, return_indices=True)

        def forward(self, x):
            values, indices = self.pool(x)
            return values * 2, indices

    data = ties_and_nan((2, 2, 6, 5), 4)
    x = samba.from_numpy(data.copy(), name="x")
    net = Net()
    pef = samba.session.compile(net, (x,), name="pool_idx", pef_path=str(tmp_path / "pool_idx.pef"),
                                inference=True)
    outs = utils.trace_graph(net, (x,), pef=pef)
    values, indices = samba.session.run([x], outs, section_types=["FWD"])
    want, want_idx = net(torch.from_numpy(data))
    np.testing.assert_array_equal(values.numpy(), want.numpy())
    np.testing.assert_array_equal(indices.numpy(), want_idx.numpy())
