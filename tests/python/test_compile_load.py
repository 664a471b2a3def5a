"""What the compiler writes, its loader takes: tensors sharing a region
(the seed's sn_region_name example) and inference PEFs traced without
output gradients."""
import numpy as np
import pytest

import samba
from samba import session

torch = pytest.importorskip("torch")


class TwoInputs(torch.nn.Module):
    def forward(self, a, b):
        return a * 2, b + 1


def test_tensors_sharing_a_region_share_device_memory(tmp_path):
    t0 = samba.SambaTensor(torch.Tensor([1, 2]), name="t0")
    t1 = samba.SambaTensor(torch.Tensor([3, 4]), name="t1", region_name="t1_other")
    t2 = samba.SambaTensor(torch.Tensor([5, 6]), name="t2", region_name="t0")
    assert (t0.sn_region_name, t1.sn_region_name, t2.sn_region_name) == ("t0", "t1_other", "t0")
    model = TwoInputs()
    samba.from_torch_model_(model)
    pef = session.compile(model, [t0, t2], name="shared_region", pef_path=str(tmp_path / "r.pef"), inference=True)
    session.trace_graph(model, [t0, t2], pef_path=pef, init_output_grads=False)
    doubled, incremented = session.run([t0, t2], section_types=["fwd"])
    # t2 was written last into the bytes t0 and t2 share, so both read [5, 6].
    np.testing.assert_array_equal(doubled.numpy(), [10, 12])
    np.testing.assert_array_equal(incremented.numpy(), [6, 7])


def test_inference_pef_traces_without_output_gradients(tmp_path):
    a = samba.SambaTensor(torch.Tensor([1, 2]), name="a")
    b = samba.SambaTensor(torch.Tensor([3, 4]), name="b")
    model = TwoInputs()
    samba.from_torch_model_(model)
    pef = session.compile(model, [a, b], name="infer", pef_path=str(tmp_path / "i.pef"), inference=True)
    for init in (False, True):
        session.trace_graph(model, [a, b], pef_path=pef, init_output_grads=init)
        doubled, incremented = session.run([a, b], section_types=["fwd"])
        np.testing.assert_array_equal(doubled.numpy(), [2, 4])
        np.testing.assert_array_equal(incremented.numpy(), [4, 5])
