"""PyTorch interop: __torch_function__ dispatch of torch.nn modules and
functions to Samba ops (checked against torch's own results), models
converted in place sharing memory, DLPack both ways, and tracing through
torch modules."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import sambaflow.samba as samba  # noqa: E402


def host(t):
    return torch.from_numpy(np.array(t.numpy()))


def converted(module):
    reference = {k: v.detach().clone() for k, v in module.state_dict().items()}
    samba.from_torch_model_(module)
    return module, reference


def test_linear_layernorm_conv_relu_split_dispatch_to_samba():
    torch.manual_seed(0)
    lin, ref = converted(nn.Linear(5, 3))
    x = samba.randn(4, 5, name="input", batch_dim=0)
    y = lin(x)
    assert isinstance(y, samba.SambaTensor)
    np.testing.assert_allclose(y.numpy(), F.linear(host(x), ref["weight"], ref["bias"]).numpy(), atol=1e-6)

    ln, ref = converted(nn.LayerNorm(3))
    np.testing.assert_allclose(ln(y).numpy(), F.layer_norm(host(y), (3,), ref["weight"], ref["bias"]).numpy(),
                               atol=1e-5)

    conv, ref = converted(nn.Conv2d(kernel_size=(3, 3), in_channels=3, out_channels=4, padding=1, bias=True))
    img = samba.randn(2, 3, 8, 8, name="img", batch_dim=0)
    np.testing.assert_allclose(conv(img).numpy(), F.conv2d(host(img), ref["weight"], ref["bias"], padding=1).numpy(),
                               atol=1e-5)

    np.testing.assert_array_equal(F.relu(x).numpy(), F.relu(host(x)).numpy())
    pieces = x.split(2, dim=1)
    assert [p.shape for p in pieces] == [(4, 2), (4, 2), (4, 1)]
    np.testing.assert_array_equal(pieces[2].numpy(), host(x)[:, 4:].numpy())
    assert [p.shape for p in torch.split(x, [1, 4], dim=1)] == [(4, 1), (4, 4)]
    np.testing.assert_allclose(torch.tanh(x).numpy(), torch.tanh(host(x)).numpy(), atol=1e-6)
    np.testing.assert_allclose(nn.Sigmoid()(x).numpy(), torch.sigmoid(host(x)).numpy(), atol=1e-6)
    np.testing.assert_allclose(F.softmax(x, dim=1).numpy(), F.softmax(host(x), dim=1).numpy(), atol=1e-6)


def test_cross_entropy_loss_module():
    logits = samba.randn(6, 4)
    target = samba.randint(4, (6,))
    for kwargs in ({}, {"reduction": "sum"}, {"label_smoothing": 0.1}):
        got = nn.CrossEntropyLoss(**kwargs)(logits, target)
        want = F.cross_entropy(host(logits), host(target), **kwargs)
        assert got.item() == pytest.approx(want.item(), rel=1e-5)
    with pytest.raises(samba.SambaError, match="size_average"):
        F.cross_entropy(logits, target, size_average=True)


def test_mixed_torch_and_samba_operands():
    x = samba.randn(2, 3)
    t = torch.ones(2, 3)
    for got, want in ((t + x, 1 + host(x)), (x + t, host(x) + 1), (t - x, 1 - host(x)), (t * x, host(x))):
        assert isinstance(got, samba.SambaTensor)
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6)


def test_unsupported_torch_function_names_itself():
    with pytest.raises(samba.SambaError, match="has no Samba op"):
        torch.fft.fft(samba.randn(4))


def test_from_torch_model_names_marks_and_shares():
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    torch_weight = model[0].weight
    samba.from_torch_model_(model)
    names = [p.sn_name for p in model.parameters()]
    assert names == ["0.weight", "0.bias", "1.weight", "1.bias"]
    w = model[0].weight
    assert isinstance(w, samba.SambaTensor) and w.is_parameter and w.requires_grad
    assert w.data_ptr() == torch_weight.data_ptr()
    assert w.torch() is torch_weight and w.data is torch_weight
    with torch.no_grad():
        torch_weight.fill_(0.25)
    assert w[0, 0].item() == 0.25
    buf = model[1].running_mean
    assert isinstance(buf, samba.SambaTensor) and buf.sn_name == "1.running_mean" and not buf.is_parameter
    assert samba.from_torch_model_(model) is model  # converting again is a no-op


def test_from_and_to_torch_tensor_and_dlpack_share_memory():
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    s = samba.from_torch_tensor(a, name="a", region_name="r")
    assert s.sn_name == "a" and s.sn_region_name == "r" and s.data_ptr() == a.data_ptr()
    assert samba.from_torch_tensor(s) is s and samba.from_torch_tensor(None) is None
    assert samba.to_torch(s) is a and samba.to_torch(a) is a and samba.to_torch(None) is None
    fresh = samba.randn(3, 2)
    t = samba.to_torch(fresh)
    assert t.data_ptr() == fresh.data_ptr() and tuple(t.shape) == (3, 2)
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int8, torch.bool):
        src = torch.ones(2, 2, dtype=dtype)
        st = samba.from_dlpack(src) if dtype != torch.bool else samba.from_torch_tensor(src)
        assert st.data_ptr() == src.data_ptr()
        assert st.dtype == dtype
        back = torch.utils.dlpack.from_dlpack(st.__dlpack__()) if dtype != torch.bool else samba.to_torch(st)
        assert back.data_ptr() == src.data_ptr() and back.dtype == dtype
    assert s.__dlpack_device__() == (1, 0)
    with pytest.raises(TypeError, match="torch.Tensor"):
        samba.from_torch_tensor([1, 2])


def test_tracing_through_torch_modules_compiles_and_runs(tmp_path):
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    samba.from_torch_model_(model)

    class WithLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = model
            self.criterion = nn.CrossEntropyLoss()

        def forward(self, x, y):
            out = self.net(x)
            return self.criterion(out, y), out

    m = WithLoss()
    x = samba.randn(5, 4, name="x", batch_dim=0)
    y = samba.randint(3, (5,), name="y", batch_dim=0)
    optim = samba.optim.SGD(m.parameters(), lr=0.1)
    s = samba.session
    pef = s.compile(m, (x, y), optim, name="torch_mlp", pef_path=str(tmp_path / "mlp.pef"))
    outs = samba.utils.trace_graph(m, (x, y), optim, pef=pef)
    assert m.output_tensors is outs and len(outs) == 2
    loss, logits = s.run([x, y], outs, section_types=["FWD"])
    want = F.cross_entropy(model_forward_in_torch(model, host(x)), host(y))
    assert loss.item() == pytest.approx(want.item(), rel=1e-5)
    assert logits.shape == (5, 3)


def model_forward_in_torch(model, x):
    out = x
    for layer in model:
        if isinstance(layer, nn.Linear):
            out = F.linear(out, host(layer.weight), host(layer.bias))
        else:
            out = F.relu(out)
    return out
