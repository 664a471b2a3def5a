"""ONNX models in: modules exported with torch.onnx.export (an MLP, a small
conv net, a transformer block with attention, layer norm and GELU) import
through the C ABI, run eagerly and compiled, and match torch within 1e-5;
an MLP with its loss trains from the ONNX graph as torch trains the module."""
import copy
import io
import pathlib
import sys

import numpy as np
import pytest

import sambaflow.samba as samba
from sambaflow.samba import optim, session, utils
from sambaflow.samba.onnx_import import OnnxModel, max_opset

torch = pytest.importorskip("torch")
nn = torch.nn

if max_opset() == 0:
    pytest.skip("this libsamba was built without the ONNX library", allow_module_level=True)


def export(module, example, opset=17, names=("x",), training=False):
    f = io.BytesIO()
    module.train(training)
    torch.onnx.export(module, example, f, opset_version=opset, input_names=list(names), do_constant_folding=not training,
                      training=torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL)
    return f.getvalue()


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return torch.softmax(self.fc2(torch.relu(self.fc1(x))), dim=-1)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(8, 8, 3, padding=1, stride=2), nn.Sigmoid(), nn.AvgPool2d(2),
                                  nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))

    def forward(self, x):
        return self.body(x)


class Block(nn.Module):
    """Pre-norm transformer block: multi-head self-attention and a GELU MLP."""

    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


def compiled_outputs(model, inputs, tmp_path, name):
    pef = session.compile(model, inputs, name=name, pef_path=str(tmp_path / f"{name}.pef"), inference=True)
    outs = utils.trace_graph(model, inputs, pef=pef, init_output_grads=False)
    return session.run(inputs, outs, section_types=["fwd"])


def check_against_torch(module, example, tmp_path, name, opset=17):
    torch.manual_seed(0)
    module.eval()
    onnx_bytes = export(module, example, opset)
    with torch.no_grad():
        want = module(example).numpy()
    x = samba.from_numpy(example.numpy().copy(), name="x")
    model = OnnxModel(onnx_bytes)
    assert model.opset == opset
    np.testing.assert_allclose(model(x).numpy(), want, rtol=1e-5, atol=1e-5)
    got = compiled_outputs(onnx_bytes, [x], tmp_path, name)[0].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [13, 17])
def test_mlp_matches_torch(tmp_path, opset):
    torch.manual_seed(1)
    check_against_torch(Mlp(), torch.randn(5, 8), tmp_path, f"mlp{opset}", opset)


def test_conv_net_matches_torch(tmp_path):
    torch.manual_seed(2)
    net = ConvNet()
    with torch.no_grad():  # running statistics that are not the identity
        net.body[1].running_mean.uniform_(-0.5, 0.5)
        net.body[1].running_var.uniform_(0.5, 2.0)
    check_against_torch(net, torch.randn(2, 3, 16, 16), tmp_path, "convnet")


def test_transformer_block_matches_torch(tmp_path):
    torch.manual_seed(3)
    check_against_torch(Block(), torch.randn(2, 6, 16), tmp_path, "block")


def test_initializers_keep_their_names_and_values(tmp_path):
    torch.manual_seed(4)
    mlp = Mlp()
    model = OnnxModel(export(mlp, torch.randn(2, 8)))
    inits = model.initializers()
    assert set(inits) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    np.testing.assert_array_equal(inits["fc1.weight"].numpy(), mlp.fc1.weight.detach().numpy())
    assert all(t.requires_grad for t in model.parameters())
    x = samba.from_numpy(np.ones((2, 8), np.float32), name="x")
    compiled_outputs(model, [x], tmp_path, "names")
    np.testing.assert_array_equal(session.get_tensors_by_name(["fc2.bias"])[0].numpy(),
                                  mlp.fc2.bias.detach().numpy())


def test_a_model_file_path_imports(tmp_path):
    torch.manual_seed(5)
    path = tmp_path / "mlp.onnx"
    path.write_bytes(export(Mlp(), torch.randn(3, 8)))
    assert [name for name, _, _ in OnnxModel(str(path)).inputs] == ["x"]
    x = samba.from_numpy(np.zeros((3, 8), np.float32), name="x")
    assert compiled_outputs(path, [x], tmp_path, "from_path")[0].shape == (3, 4)


def test_an_unsupported_op_names_node_op_and_opset():
    class ArcTangent(nn.Module):
        def forward(self, x):
            return torch.atan(x)

    with pytest.raises(samba.SambaError, match=r"\(Atan, opset 17\): the op is not supported"):
        OnnxModel(export(ArcTangent(), torch.randn(3)))


class MlpLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, x, y):
        return ((self.mlp(x) - y) ** 2).mean()


def test_training_from_onnx_matches_torch(tmp_path):
    torch.manual_seed(6)
    module = MlpLoss()
    # The same module trained through Samba's torch front end, after the ONNX run.
    frontend_module = copy.deepcopy(module)
    xs, ys = torch.randn(16, 8), torch.randn(16, 1)
    onnx_bytes = export(module, (xs, ys), names=("x", "y"), training=True)
    model = OnnxModel(onnx_bytes)
    x, y = samba.from_numpy(xs.numpy().copy(), name="x"), samba.from_numpy(ys.numpy().copy(), name="y")
    opt = optim.SGD(model.parameters(), lr=0.05)
    pef = session.compile(model, [x, y], opt, name="onnx_train", pef_path=str(tmp_path / "train.pef"))
    outs = utils.trace_graph(model, [x, y], opt, pef=pef)
    losses = [session.run([x, y], outs)[0].item() for _ in range(20)]

    ref = torch.optim.SGD(module.parameters(), lr=0.05)
    want = []
    for _ in range(20):
        ref.zero_grad()
        loss = module(xs, ys)
        loss.backward()
        ref.step()
        want.append(loss.item())
    np.testing.assert_allclose(losses, want, rtol=1e-5, atol=1e-6)
    trained = session.get_tensors_by_name([name for name in model.initializers()])
    for t, (name, _) in zip(trained, model.initializers().items()):
        np.testing.assert_allclose(t.numpy(), dict(module.named_parameters())[name].detach().numpy(),
                                   rtol=1e-4, atol=1e-5)

    # The torch front end on the same module takes the same 20 steps.
    samba.from_torch_model_(frontend_module)
    fx, fy = samba.from_numpy(xs.numpy().copy(), name="x"), samba.from_numpy(ys.numpy().copy(), name="y")
    fopt = optim.SGD(frontend_module.parameters(), lr=0.05)
    fpef = session.compile(frontend_module, [fx, fy], fopt, name="torch_train", pef_path=str(tmp_path / "torch.pef"))
    fouts = utils.trace_graph(frontend_module, [fx, fy], fopt, pef=fpef)
    frontend_losses = [session.run([fx, fy], fouts)[0].item() for _ in range(20)]
    np.testing.assert_allclose(losses, frontend_losses, rtol=1e-5, atol=1e-6)
    for t, (name, _) in zip(trained, model.initializers().items()):
        np.testing.assert_allclose(t.numpy(), dict(frontend_module.named_parameters())[name].sn_data.numpy(),
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["mlp", "convnet", "block"])
def test_outputs_match_onnxruntime_on_the_same_file(tmp_path, name):
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(7)
    module, example = {"mlp": (Mlp(), torch.randn(4, 8)), "convnet": (ConvNet(), torch.randn(2, 3, 16, 16)),
                       "block": (Block(), torch.randn(2, 6, 16))}[name]
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(export(module, example))
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": example.numpy()})[0]
    x = samba.from_numpy(example.numpy().copy(), name="x")
    got = compiled_outputs(OnnxModel(str(path)), [x], tmp_path, f"ort_{name}")[0].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_the_example_apps_model_matches_torch_and_onnxruntime(tmp_path):
    # examples/python/resffn_logreg.py's module, exported with its loss.
    examples = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"
    sys.path.insert(0, str(examples))
    try:
        from resffn_logreg import ResFFNLogReg
    finally:
        sys.path.remove(str(examples))
    torch.manual_seed(10)
    module = ResFFNLogReg(64, 32, 10).eval()
    xs, ys = torch.randn(4, 64), torch.tensor([1, 0, 9, 3])
    f = io.BytesIO()
    torch.onnx.export(module, (xs, ys), f, opset_version=17, input_names=["x", "y"], output_names=["loss", "logits"])
    path = tmp_path / "resffn.onnx"
    path.write_bytes(f.getvalue())
    with torch.no_grad():
        want = [t.numpy() for t in module(xs, ys)]
    x, y = samba.from_numpy(xs.numpy().copy(), name="x"), samba.from_numpy(ys.numpy().copy(), name="y")
    got = [t.numpy() for t in compiled_outputs(OnnxModel(str(path)), [x, y], tmp_path, "resffn")]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": xs.numpy(), "y": ys.numpy()})
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)


def test_onnx_backend_runs_nodes_and_models():
    onnx = pytest.importorskip("onnx")
    from sambaflow.samba import onnx as backend

    helper = onnx.helper
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal((3, 4), dtype=np.float32), rng.standard_normal((3, 4), dtype=np.float32)
    np.testing.assert_array_equal(backend.run_node(helper.make_node("Relu", ["x"], ["r"]), [x])[0], np.maximum(x, 0))
    np.testing.assert_array_equal(backend.run_node(helper.make_node("Add", ["x", "y"], ["s"]), [x, y])["s"], x + y)
    torch.manual_seed(9)
    mlp, example = Mlp().eval(), torch.randn(2, 8)
    model = onnx.load_from_string(export(mlp, example))
    with torch.no_grad():
        want = mlp(example).numpy()
    np.testing.assert_allclose(backend.run_model(model, [example.numpy()])[0], want, rtol=1e-5, atol=1e-5)
    assert backend.SambaBackend.supports_device("CPU") and not backend.supports_device("CUDA")
