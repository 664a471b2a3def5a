"""What a prompt graph and a token graph rely on in one multigraph PEF: a
buffer one graph writes is what the other reads (device memory, not the
host's copy); each graph's constants are its own; and a constant the model
computed with torch and dropped is compiled with its values."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import sambaflow.samba as samba  # noqa: E402


def load(tmp_path, *graphs):
    session = samba.SambaSession()
    for g in graphs:
        session.add_graph(g)
    pef = session.compile_multigraph("state", pef_path=str(tmp_path / "state.pef"))
    session.init_multigraph_runtime(pef)
    for g in graphs:
        session.trace_multigraph(g)
    return session


def test_a_buffer_one_graph_writes_is_what_the_other_reads(tmp_path):
    cache = samba.from_torch_tensor(torch.zeros(2, 3), name="cache")
    x = samba.from_torch_tensor(torch.zeros(2, 3), name="x")
    step = samba.from_torch_tensor(torch.zeros(1, 1), name="step")

    def write(x):
        cache.copy_(x * 2)
        return x + 0

    def read(step):
        return cache + step

    session = load(tmp_path, samba.SambaGraph("write", write, (x,), inference=True),
                   samba.SambaGraph("read", read, (step,), inference=True))
    values = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    x.copy_(values)
    session.run([x], graph_name="write")
    step.copy_(torch.ones(1, 1))
    [got] = session.run([step], graph_name="read")
    np.testing.assert_array_equal(got.numpy(), values.numpy() * 2 + 1)
    np.testing.assert_array_equal(cache.numpy(), np.zeros((2, 3)))  # the host's copy is not the device's


def test_each_graph_keeps_its_own_constants(tmp_path):
    """Both graphs' first constant is named const_0 by the tracer; they are
    different tensors of different shapes."""
    a = samba.from_torch_tensor(torch.ones(2), name="a")
    b = samba.from_torch_tensor(torch.ones(3), name="b")

    def first(a):
        return a * torch.tensor([2.0, 3.0])

    def second(b):
        return b + torch.tensor([10.0, 20.0, 30.0])

    session = load(tmp_path, samba.SambaGraph("first", first, (a,), inference=True),
                   samba.SambaGraph("second", second, (b,), inference=True))
    [ga] = session.run([a], graph_name="first")
    [gb] = session.run([b], graph_name="second")
    np.testing.assert_array_equal(ga.numpy(), [2.0, 3.0])
    np.testing.assert_array_equal(gb.numpy(), [11.0, 21.0, 31.0])


def test_a_mask_the_model_computes_with_torch_keeps_its_values(tmp_path):
    """A causal mask built with torch inside the model is a temporary the
    model drops before the PEF is written."""
    scores = torch.randn(1, 2, 5, 5)
    x = samba.from_torch_tensor(scores.clone(), name="scores")

    def masked(x):
        positions = torch.arange(5).unsqueeze(0)
        return torch.where(positions.transpose(0, 1) >= positions, x, -1e9)

    session = load(tmp_path, samba.SambaGraph("masked", masked, (x,), inference=True))
    torch.randn(64, 64)  # reuse freed memory, as a long-running app would
    [got] = session.run([x], graph_name="masked")
    np.testing.assert_array_equal(got.numpy(), torch.where(torch.ones(5, 5).tril().bool(), scores, -1e9).numpy())
