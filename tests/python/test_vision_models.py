"""Vision models someone else wrote run unchanged: ResNet-18 (torchvision's
resnet18(weights=None) when python3-torchvision imports, else the same
network written out here, with nn.ReLU(inplace=True)) and a small CNN with BatchNorm2d and dropout,
converted with from_torch_model_: the eager forward, the compiled inference
and 10 compiled AdamW training steps match PyTorch, and run(train=False)
is torch's eval() (dropout off, batch norms on their running statistics).
Images are small (32x32, batch 4) so the tests stay quick on two cores."""
import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import sambaflow.samba as samba  # noqa: E402
import sambaflow.samba.utils as utils  # noqa: E402
from test_torch_nn_ops import WithLoss  # noqa: E402  (the model with its cross-entropy loss and logits)

BATCH, CLASSES, SIZE = 4, 10, 32
ADAMW = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock: two 3x3 convolutions and a shortcut."""

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class ResNet18(nn.Module):
    """torchvision.models.resnet18's network, for when torchvision is not installed."""

    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        widths = (64, 128, 256, 512)
        for i, planes in enumerate(widths):
            inplanes = widths[max(i - 1, 0)]
            stride = 1 if i == 0 else 2
            setattr(self, f"layer{i + 1}", nn.Sequential(BasicBlock(inplanes, planes, stride), BasicBlock(planes, planes)))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18():
    try:
        import torchvision
    except ImportError:
        return ResNet18(CLASSES)
    return torchvision.models.resnet18(weights=None, num_classes=CLASSES)


class SmallCNN(nn.Module):
    def __init__(self, p=0.0):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.dropout = nn.Dropout(p)
        self.fc = nn.Linear(16 * 8 * 8, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(self.dropout(torch.flatten(x, 1)))


# (model factory, dtype). ResNet-18 runs in float64: with BatchNorm over 4
# images its float32 training is chaotic (torch's own float32 losses leave its
# float64 ones by 4% within 10 AdamW steps), so only float64 separates an
# error in Samba from rounding.
MODELS = {"resnet18": (resnet18, torch.float64), "cnn": (SmallCNN, torch.float32)}


def images(seed=0, case="cnn"):
    rng = np.random.default_rng(seed)
    dtype = np.float64 if MODELS[case][1] == torch.float64 else np.float32
    return (rng.standard_normal((BATCH, 3, SIZE, SIZE)).astype(dtype),
            rng.integers(0, CLASSES, BATCH))


def pair(case, seed=0):
    """(converted model, the PyTorch reference): the same weights."""
    torch.manual_seed(seed)
    make_model, dtype = MODELS[case]
    reference = make_model().to(dtype)
    return samba.from_torch_model_(copy.deepcopy(reference)), reference


def close(got, want, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", sorted(MODELS))
def test_eager_forward_in_training_and_evaluation_matches_pytorch(case):
    model, reference = pair(case)
    x, _ = images(case=case)
    close(model(samba.from_numpy(x)).numpy(), reference(torch.from_numpy(x)).detach().numpy())
    model.eval(), reference.eval()
    x, _ = images(1, case)
    close(model(samba.from_numpy(x)).numpy(), reference(torch.from_numpy(x)).detach().numpy())


@pytest.mark.parametrize("case", sorted(MODELS))
def test_compiled_inference_matches_pytorch(case, tmp_path):
    model, reference = pair(case)
    warm, _ = images(2, case)
    reference(torch.from_numpy(warm)), model(samba.from_numpy(warm))  # running statistics away from 0 and 1
    model.eval(), reference.eval()
    x = samba.from_numpy(images(3, case)[0], name="x")
    s = samba.session
    pef = s.compile(model, (x,), name=f"{case}_infer", pef_path=str(tmp_path / f"{case}_infer.pef"), inference=True)
    outs = utils.trace_graph(model, (x,), pef=pef, init_output_grads=False)
    got = s.run([x], outs, section_types=["FWD"])[0].numpy()
    close(got, reference(torch.from_numpy(np.array(x.numpy()))).detach().numpy())


@pytest.mark.parametrize("case", sorted(MODELS))
def test_compiled_adamw_training_matches_pytorch(case, tmp_path):
    model, reference = pair(case)
    net, torch_net = WithLoss(model), WithLoss(reference)
    xs, ys = images(4, case)
    x, y = samba.from_numpy(xs, name="x"), samba.from_numpy(ys, name="y")
    opt = samba.optim.AdamW(list(net.parameters()), **ADAMW)
    s = samba.session
    pef = s.compile(net, (x, y), opt, name=f"{case}_train", pef_path=str(tmp_path / f"{case}_train.pef"))
    outs = utils.trace_graph(net, (x, y), opt, pef=pef)
    got = [s.run([x, y], outs)[0].item() for _ in range(10)]
    s.to_cpu(net)

    torch_opt = torch.optim.AdamW(torch_net.parameters(), **ADAMW)
    want = []
    for _ in range(10):
        torch_opt.zero_grad()
        loss, _ = torch_net(torch.from_numpy(xs), torch.from_numpy(ys))
        loss.backward()
        torch_opt.step()
        want.append(loss.item())
    close(got, want, atol=0)
    theirs = reference.state_dict()
    for name, value in model.state_dict().items():
        ours = np.asarray(value.numpy()) if isinstance(value, samba.SambaTensor) else value.numpy()
        close(ours, theirs[name].numpy(), rtol=0, atol=1e-4)


def test_train_false_turns_dropout_off_and_batch_norm_to_running_statistics(tmp_path):
    model, reference = pair("cnn")
    model.dropout.p = reference.dropout.p = 0.5
    net = WithLoss(model)
    xs, ys = images(5)
    x, y = samba.from_numpy(xs, name="x"), samba.from_numpy(ys, name="y")
    opt = samba.optim.AdamW(list(net.parameters()), **ADAMW)
    s = samba.session
    pef = s.compile(net, (x, y), opt, name="cnn_dropout", pef_path=str(tmp_path / "cnn_dropout.pef"))
    outs = utils.trace_graph(net, (x, y), opt, pef=pef)
    reference.eval()
    want = reference(torch.from_numpy(xs)).detach().numpy()
    evaluated = s.run([x, y], outs, section_types=["FWD"], train=False)[1].numpy().copy()
    close(evaluated, want)
    trained = s.run([x, y], outs, section_types=["FWD"])[1].numpy()
    assert np.abs(trained - want).max() > 1e-2, "train=True keeps dropout and batch statistics on"
    # The training forward moved the running statistics, as torch's does.
    reference.train()
    reference(torch.from_numpy(xs))
    reference.eval()
    close(s.run([x, y], outs, section_types=["FWD"], train=False)[1].numpy(),
          reference(torch.from_numpy(xs)).detach().numpy())
