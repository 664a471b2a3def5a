"""SambaTensor's SambaFlow surface: constructor forms, attributes, dtype
conversions, new_*, views, indexing, autograd, numpy and DLPack sharing,
creation functions, and errors carrying the C status and message."""
import numpy as np
import pytest

import sambaflow.samba as samba
from sambaflow.samba import SambaError, SambaTensor


def test_constructor_forms_share_memory_or_are_empty():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = SambaTensor(a, name="t0")
    assert t.sn_name == "t0" and t.sn_region_name == "t0" and t.data_ptr() == a.ctypes.data
    t1 = SambaTensor(a, name="t1", region_name="t1_other")
    assert t1.sn_region_name == "t1_other"
    again = SambaTensor(t)  # a SambaTensor shares the same storage
    assert again.data_ptr() == t.data_ptr()
    empty = SambaTensor(shape=(2, 3), dtype=samba.bfloat16, name="e")
    assert empty.shape == (2, 3) and empty.dtype == samba.bfloat16 and not empty.has_data()
    with pytest.raises(ValueError, match="not both"):
        SambaTensor(a, shape=(2, 3))
    with pytest.raises(ValueError, match="torch_tensor"):
        SambaTensor()


def test_metadata_and_dtypes():
    t = samba.zeros(3, 4, 5)
    assert t.size() == (3, 4, 5) and t.size(1) == 4 and t.shape == (3, 4, 5)
    assert t.dim() == t.ndimension() == t.ndim == 3
    assert t.numel() == t.nelement() == 60 and t.element_size() == 4 and t.nbytes == 240
    assert t.stride() == (20, 5, 1) and t.stride(0) == 20
    assert t.is_floating_point() and t.is_contiguous()
    assert t.dtype == samba.float32 and t.samba_dtype == "float" and t.type() == "float32"
    for conv, dt in ((t.bfloat16, "bfloat16"), (t.float, "float32"), (t.int, "int32"), (t.long, "int64"),
                     (t.short, "int16"), (t.bool, "bool")):
        assert conv().samba_dtype == dt and conv().dtype == samba.dtypes.to_torch(dt)
    assert t.to(samba.float32).data_ptr() == t.data_ptr()  # same dtype: no copy
    assert t.to(samba.float64).dtype == samba.float64 and t.type(samba.int64).dtype == samba.int64
    assert t.type_as(samba.zeros(1, dtype="int8")).dtype == samba.int8
    assert t.to(samba.zeros(1, dtype="int16")).dtype == samba.int16
    assert samba.promote_types(samba.bfloat16, samba.float32) == samba.float32
    assert str(t.device) == "cpu"


def test_new_tensors_and_views():
    base = samba.ones((), dtype=samba.float32)
    np.testing.assert_array_equal(base.new_full((2, 3), 5.0).numpy(), np.full((2, 3), 5.0))
    assert base.new_full((2, 3), 5.0, dtype=samba.bfloat16).dtype == samba.bfloat16
    np.testing.assert_array_equal(base.new_ones(3).numpy(), [1, 1, 1])
    np.testing.assert_array_equal(base.new_zeros((2,)).numpy(), [0, 0])
    assert base.new_empty((4, 2)).shape == (4, 2)
    assert base.new_zeros((2,), requires_grad=True).requires_grad
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = samba.from_numpy(a)
    np.testing.assert_array_equal(t.reshape(-1, 6).numpy(), a.reshape(-1, 6))
    np.testing.assert_array_equal(t.reshape((2, 6)).numpy(), a.reshape(2, 6))
    np.testing.assert_array_equal(t.permute(1, 0).numpy(), a.T)
    np.testing.assert_array_equal(t.T.numpy(), a.T)
    assert t.view_as(samba.zeros(2, 6)).shape == (2, 6)
    assert t.T.contiguous().is_contiguous() and not t.T.is_contiguous()
    c = t.clone()
    assert c.data_ptr() != t.data_ptr()
    assert t.detach().data_ptr() == t.data_ptr()
    with pytest.raises(SambaError) as e:
        t.T.view_as(samba.zeros(12))
    assert e.value.status == "SAMBA_ERR_INVALID_ARGUMENT"


def test_operators_match_numpy():
    a = np.array([[1.0, -2.0], [3.0, 4.0]], dtype=np.float32)
    b = np.array([[0.5, 2.0], [-1.0, 2.0]], dtype=np.float32)
    x, y = samba.from_numpy(a), samba.from_numpy(b)
    for got, want in (((x + y), a + b), ((x - y), a - b), ((x * y), a * b), ((x / y), a / b), ((x @ y), a @ b),
                      ((x ** 2), a ** 2), ((-x), -a), ((2 - x), 2 - a), ((1 / y), 1 / b), (abs(x), abs(a))):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    for got, want in (((x < y), a < b), ((x <= y), a <= b), ((x > y), a > b), ((x >= y), a >= b),
                      ((x == y), a == b), ((x != y), a != b)):
        np.testing.assert_array_equal(got.numpy(), want)
    m = x > 0
    np.testing.assert_array_equal((~m).numpy(), ~(a > 0))
    np.testing.assert_array_equal((m & (y > 0)).numpy(), (a > 0) & (b > 0))


def test_indexing_as_the_seed_shows():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = samba.from_numpy(a.copy())
    np.testing.assert_array_equal(t[:, 2].numpy(), a[:, 2])
    index = SambaTensor(np.array([0.0, 2.0], dtype=np.float32))
    np.testing.assert_array_equal(t[None, :, index].numpy(), a[None][:, :, [0, 2]])
    z = samba.zeros(2, 3)
    z[:, 2] = samba.ones(2)
    np.testing.assert_array_equal(z.numpy(), [[0, 0, 1], [0, 0, 1]])
    z[None, :, index] = 2 * samba.ones(1, 2, 2)
    np.testing.assert_array_equal(z.numpy(), [[2, 0, 2], [2, 0, 2]])
    z[0, 1] = 7
    assert z[0, 1].item() == 7
    assert [r.shape for r in z] == [(3,), (3,)]
    with pytest.raises(SambaError) as e:
        z[5]
    assert e.value.status == "SAMBA_ERR_OUT_OF_RANGE" and "5" in e.value.message


def test_autograd_backward_grad_and_retain_graph():
    w = samba.from_numpy(np.array([1.0, 2.0, 3.0], dtype=np.float32)).requires_grad_()
    assert w.requires_grad and w.grad is None
    loss = samba.sum(w * w)
    loss.backward(retain_graph=True)
    np.testing.assert_allclose(w.grad.numpy(), [2, 4, 6])
    loss.backward()  # retained once: accumulates
    np.testing.assert_allclose(w.grad.numpy(), [4, 8, 12])
    with pytest.raises(SambaError) as e:
        loss.backward()
    assert e.value.status == "SAMBA_ERR_INVALID_STATE"
    w.grad = np.zeros(3, dtype=np.float32)
    np.testing.assert_array_equal(w.grad.numpy(), [0, 0, 0])
    v = samba.from_numpy(np.array([1.0, 1.0], dtype=np.float32)).requires_grad_()
    (v * 3).backward(samba.from_numpy(np.array([1.0, 2.0], dtype=np.float32)))
    np.testing.assert_allclose(v.grad.numpy(), [3, 6])


def test_numpy_sharing_both_ways_and_data():
    a = np.zeros((2, 2), dtype=np.float64)
    t = samba.from_numpy(a)
    out = np.asarray(t)
    assert out.ctypes.data == a.ctypes.data == t.data_ptr()
    out[1, 1] = 3
    assert a[1, 1] == 3 and t[1, 1].item() == 3
    t.data = np.ones((2, 2))
    assert a.sum() == 4
    with pytest.raises(ValueError, match="shape"):
        t.data = np.ones(3)
    t.clear_data()
    assert not t.has_data()
    with pytest.raises(SambaError) as e:
        t.data_ptr()
    assert e.value.status == "SAMBA_ERR_INVALID_STATE"


def test_creation_functions_with_names():
    image = samba.randn(8, 4, name="image", batch_dim=0)
    label = samba.randint(10, (8,), name="label", batch_dim=0)
    assert image.sn_name == "image" and image.shape == (8, 4) and image.dtype == samba.float32
    assert label.dtype == samba.int64 and label.shape == (8,)
    assert 0 <= label.numpy().min() and label.numpy().max() < 10
    r = samba.randint(5, 7, (100,)).numpy()
    assert r.min() >= 5 and r.max() < 7
    u = samba.rand(1000).numpy()
    assert 0 <= u.min() and u.max() < 1
    np.testing.assert_array_equal(samba.ones(2, 2).numpy(), np.ones((2, 2)))
    np.testing.assert_array_equal(samba.zeros((2, 3)).numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(samba.full((2,), 4.5).numpy(), [4.5, 4.5])
    np.testing.assert_array_equal(samba.arange(4).numpy(), [0, 1, 2, 3])
    assert samba.empty(3, name="e").sn_name == "e"
    samba.set_seed(7)
    first = samba.randn(16).numpy().copy()
    samba.set_seed(7)
    np.testing.assert_array_equal(samba.randn(16).numpy(), first)


def test_generated_ops_have_schema_docs_and_check_arguments():
    assert set(samba.ops()) == set(samba.op_names())
    assert samba.op_schema("layer_norm")["attrs"][0]["name"] == "normalized_shape"
    x = samba.randn(2, 6)
    w, b = samba.ones(6), samba.zeros(6)
    y = samba.layer_norm(x, w, b, normalized_shape=[6])
    np.testing.assert_allclose(y.numpy().mean(axis=1), [0, 0], atol=1e-6)
    with pytest.raises(TypeError, match="missing input"):
        samba.linear()
    with pytest.raises(SambaError) as e:
        samba.linear(x, samba.zeros(3, 5))
    assert e.value.status == "SAMBA_ERR_SHAPE_MISMATCH" and "linear" in str(e.value)


def test_missing_library_functions_raise_a_clear_error():
    from sambaflow.samba._lib import call
    with pytest.raises(SambaError, match="samba_no_such_function is not available"):
        call("samba_no_such_function")
