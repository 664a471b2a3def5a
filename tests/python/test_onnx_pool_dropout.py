"""ONNX MaxPool's Indices output and Dropout in training mode: MaxPool with
indices exported by torch.onnx.export gives torch's pair; MaxPool nodes give
ONNX's flattened indices (1-D, pads the registry takes and pads it does not,
storage_order 1) against a direct loop; Dropout with training_mode keeps
about 1 - ratio of the elements, scales them by 1 / (1 - ratio), reports them
in its mask, is the identity at ratio 0, and trains through its mask."""
import io
import itertools

import numpy as np
import pytest

import sambaflow.samba as samba
from sambaflow.samba import optim, session, utils
from sambaflow.samba.onnx_import import OnnxModel, max_opset

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
helper, TensorProto = onnx.helper, onnx.TensorProto

if max_opset() == 0:
    pytest.skip("this libsamba was built without the ONNX library", allow_module_level=True)


def model_of(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def run(onnx_bytes, *arrays):
    out = OnnxModel(onnx_bytes)(*(samba.from_numpy(a.copy(), name=f"in{i}") for i, a in enumerate(arrays)))
    return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("pool, shape", [(torch.nn.MaxPool2d(3, 2, 1, return_indices=True), (2, 3, 7, 6)),
                                         (torch.nn.MaxPool2d(2, ceil_mode=True, return_indices=True), (1, 2, 5, 5)),
                                         (torch.nn.MaxPool1d(3, 2, 1, return_indices=True), (2, 3, 9))])
def test_max_pool_with_indices_exported_by_torch_gives_torch_pair(pool, shape):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    f = io.BytesIO()
    torch.onnx.export(pool, x, f, opset_version=17, input_names=["x"])
    values, indices = run(f.getvalue(), x.numpy())
    want, want_indices = pool(x)
    np.testing.assert_array_equal(values, want.numpy())
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(indices, want_indices.numpy())


def onnx_max_pool(x, kernel, strides, begin, end, column_major=False):
    """ONNX MaxPool (floor mode) by its definition: values and indices over the
    whole unpadded tensor, the first maximum of each window."""
    n, c, *spatial = x.shape
    out = [(s + b + e - k) // st + 1 for s, k, st, b, e in zip(spatial, kernel, strides, begin, end)]
    values = np.empty((n, c, *out), np.float32)
    indices = np.empty((n, c, *out), np.int64)
    plane = int(np.prod(spatial))
    for b, ch, *o in itertools.product(range(n), range(c), *(range(d) for d in out)):
        best, at = -np.inf, None
        for tap in itertools.product(*(range(k) for k in kernel)):
            pos = [oi * st - bi + t for oi, st, bi, t in zip(o, strides, begin, tap)]
            if all(0 <= p < s for p, s in zip(pos, spatial)) and (at is None or x[(b, ch, *pos)] > best):
                best, at = x[(b, ch, *pos)], pos
        flat = at[0] if len(at) == 1 else (at[1] * spatial[0] + at[0] if column_major else at[0] * spatial[1] + at[1])
        values[(b, ch, *o)], indices[(b, ch, *o)] = best, (b * c + ch) * plane + flat
    return values, indices


@pytest.mark.parametrize("shape, attrs", [
    ((2, 3, 9), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ((2, 2, 6, 5), dict(kernel_shape=[3, 3], strides=[2, 1], pads=[1, 1, 1, 1])),
    ((2, 2, 6, 5), dict(kernel_shape=[3, 2], strides=[1, 2], pads=[0, 1, 2, 1])),  # pads the registry lacks
    ((1, 2, 5, 4), dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 0, 0, 1], storage_order=1)),
])
def test_max_pool_node_indices_are_onnx_flat_indices(shape, attrs):
    x = np.random.default_rng(1).integers(-4, 5, size=shape).astype(np.float32)  # ties
    rank = len(shape) - 2
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)
    want, want_indices = onnx_max_pool(x, attrs["kernel_shape"], attrs["strides"], attrs["pads"][:rank],
                                       attrs["pads"][rank:], attrs.get("storage_order", 0) == 1)
    onnx_bytes = model_of([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, want.shape),
                           helper.make_tensor_value_info("i", TensorProto.INT64, want.shape)])
    values, indices = run(onnx_bytes, x)
    np.testing.assert_array_equal(values, want)
    np.testing.assert_array_equal(indices, want_indices)


def dropout_model(shape, ratio, mask=True, seed=None):
    ratio_init = helper.make_tensor("ratio", TensorProto.FLOAT, [], [ratio])
    training = helper.make_tensor("training", TensorProto.BOOL, [], [True])
    node = helper.make_node("Dropout", ["x", "ratio", "training"], ["y", "mask"] if mask else ["y"],
                            **({} if seed is None else {"seed": seed}))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)]
    if mask:
        outputs.append(helper.make_tensor_value_info("mask", TensorProto.BOOL, shape))
    return model_of([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], outputs,
                    [ratio_init, training])


@pytest.mark.parametrize("ratio", [0.1, 0.5, 0.75])
def test_training_dropout_keeps_and_scales_as_its_mask_says(ratio):
    x = np.random.default_rng(2).uniform(0.5, 2.0, size=(256, 512)).astype(np.float32)  # no zeros
    y, mask = run(dropout_model(x.shape, ratio), x)
    assert mask.dtype == np.bool_
    np.testing.assert_array_equal(mask, y != 0)
    # 131072 draws: the kept share is within 5 standard deviations of 1 - ratio.
    assert abs(mask.mean() - (1 - ratio)) < 5 * np.sqrt(ratio * (1 - ratio) / x.size)
    np.testing.assert_allclose(y[mask], x[mask] / (1 - ratio), rtol=1e-6)
    # The mask is random: rows differ, and another seed draws another mask.
    assert not np.array_equal(mask[0], mask[1])
    _, other = run(dropout_model(x.shape, ratio, seed=12345), x)
    assert not np.array_equal(mask, other)


def test_training_dropout_at_ratio_zero_is_the_identity():
    x = np.random.default_rng(3).standard_normal((8, 16)).astype(np.float32)
    y, mask = run(dropout_model(x.shape, 0.0), x)
    np.testing.assert_array_equal(y, x)
    assert mask.all()
    (y,) = run(dropout_model(x.shape, 0.0, mask=False), x)
    np.testing.assert_array_equal(y, x)


def test_training_through_dropout_from_onnx_follows_the_mask(tmp_path):
    """loss = sum(Dropout(x @ w)) trained with SGD: w's step is
    -lr * xᵀ (mask / (1 - ratio)), with the mask the step drew."""
    rng = np.random.default_rng(4)
    xs, w0, ratio, lr = rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(
        np.float32), 0.5, 0.1
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Dropout", ["h", "ratio", "training"], ["d", "mask"]),
             helper.make_node("ReduceSum", ["d"], ["loss"], keepdims=0)]
    onnx_bytes = model_of(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, xs.shape)],
                          [helper.make_tensor_value_info("loss", TensorProto.FLOAT, []),
                           helper.make_tensor_value_info("mask", TensorProto.BOOL, [6, 5])],
                          [helper.make_tensor("w", TensorProto.FLOAT, w0.shape, w0.flatten()),
                           helper.make_tensor("ratio", TensorProto.FLOAT, [], [ratio]),
                           helper.make_tensor("training", TensorProto.BOOL, [], [True])])
    model = OnnxModel(onnx_bytes)
    x = samba.from_numpy(xs.copy(), name="x")
    opt = optim.SGD(model.parameters(), lr=lr)
    pef = session.compile(model, [x], opt, name="onnx_dropout", pef_path=str(tmp_path / "dropout.pef"))
    outs = utils.trace_graph(model, [x], opt, pef=pef)
    w = w0
    masks = []
    for _ in range(3):
        loss, mask = (t.numpy() for t in session.run([x], outs)[:2])
        masks.append(mask.copy())
        np.testing.assert_allclose(loss, ((xs @ w) * mask / (1 - ratio)).sum(), rtol=1e-5)
        w = w - lr * xs.T @ (mask / (1 - ratio))
        np.testing.assert_allclose(session.get_tensors_by_name(["w"])[0].numpy(), w, rtol=1e-5, atol=1e-6)
    assert not np.array_equal(masks[0], masks[1])  # each step draws a new mask
