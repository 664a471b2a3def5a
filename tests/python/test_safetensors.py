"""safetensors in and out of a session: Samba's parameters read by
safetensors.torch.load_file, a Hugging Face save_pretrained checkpoint loaded
into a compiled model giving PyTorch's outputs, and malformed files refused
without changing any tensor. Needs torch and safetensors (the HF venv of
scripts/setup_python_env.sh; ctest python.safetensors)."""
import json
import struct

import numpy as np
import pytest

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import sambaflow.samba as samba  # noqa: E402
from sambaflow.samba import session  # noqa: E402


def compiled_mlp(tmp_path, seed=1):
    """A trained-shape MLP with an AdamW optimizer, compiled and loaded."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    samba.from_torch_model_(model)

    class WithLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = model

        def forward(self, x, y):
            return F.cross_entropy(self.net(x), y)

    m = WithLoss()
    x = samba.randn(5, 4, name="x", batch_dim=0)
    y = samba.randint(3, (5,), name="y", batch_dim=0)
    optim = samba.optim.AdamW(m.parameters(), lr=0.1)
    pef = session.compile(m, (x, y), optim, name="st_mlp", pef_path=str(tmp_path / f"mlp{seed}.pef"))
    samba.utils.trace_graph(m, (x, y), optim, pef=pef)
    return m, (x, y)


def device_values(names):
    return {n: np.array(t.numpy()) for n, t in zip(names, session.get_tensors_by_name(names))}


PARAMS = ["0.weight", "0.bias", "2.weight", "2.bias"]  # named when converted (from_torch_model_)


def test_samba_weights_read_by_safetensors_torch(tmp_path):
    m, inputs = compiled_mlp(tmp_path)
    session.run(list(inputs), section_types=["FWD", "BCKWD", "OPT"])  # state moves off its initial values
    path = tmp_path / "w.safetensors"
    session.save_safetensors(path, include_optimizer_state=True)
    loaded = safetensors_torch.load_file(str(path))
    want = device_values(PARAMS)
    for name in PARAMS:
        np.testing.assert_array_equal(loaded[name].numpy(), want[name])
    assert "0.weight.exp_avg" in loaded and "0.weight.exp_avg_sq" in loaded
    assert np.abs(loaded["0.weight.exp_avg"].numpy()).sum() > 0
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        metadata = json.loads(f.read(n))["__metadata__"]
    assert metadata["format"] == "pt" and metadata["program"] == "st_mlp"

    session.save_safetensors(path)  # parameters only, replacing the file atomically
    assert sorted(safetensors_torch.load_file(str(path))) == sorted(PARAMS)


def test_torch_state_dict_loads_by_name_with_a_name_map(tmp_path):
    compiled_mlp(tmp_path)
    torch.manual_seed(7)
    reference = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    path = tmp_path / "torch.safetensors"
    safetensors_torch.save_file({"model." + k: v for k, v in reference.state_dict().items()}, str(path))
    with pytest.raises(samba.SambaError, match="has no target among the session"):
        session.load_safetensors(path)  # "model.0.weight" has no target without the map
    session.load_safetensors(path, name_map={"model.": ""})
    got = device_values(PARAMS)
    for k, v in reference.state_dict().items():
        np.testing.assert_array_equal(got[k], v.numpy())


def test_malformed_file_is_refused_and_changes_nothing(tmp_path):
    compiled_mlp(tmp_path)
    before = device_values(PARAMS)
    good = {k: torch.full(tuple(v.shape), 0.5) for k, v in before.items()}
    path = tmp_path / "bad.safetensors"
    safetensors_torch.save_file(good, str(path))
    raw = bytearray(path.read_bytes())
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header["2.bias"]["data_offsets"][1] += 4  # one tensor now reaches past its byte size
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])
    with pytest.raises(samba.SambaError, match="2.bias"):
        session.load_safetensors(path)
    after = device_values(PARAMS)
    for k in PARAMS:
        np.testing.assert_array_equal(after[k], before[k])
