"""Tensor creation with SambaFlow's names: samba.randn(4, 5, name="x"), ..."""
import ctypes

from . import dtypes
from .lazy import Materializer
from ._lib import out_handle
from .functions import call_op
from .session import session
from .tensor import SambaTensor, materializer_of


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(size)


def _finish(t, name, requires_grad, batch_dim=None):
    if name:
        t.sn_name = name
    if requires_grad:
        t.requires_grad = True
    return t


def empty(*size, dtype="float32", name=None, requires_grad=False, batch_dim=None):
    shape = _shape(size)
    arr = (ctypes.c_int64 * max(1, len(shape)))(*shape)
    t = SambaTensor._wrap(out_handle("samba_tensor_create", ctypes.c_int32(dtypes.from_name(dtype)), arr,
                               ctypes.c_size_t(len(shape))))
    return _finish(t, name, requires_grad, batch_dim)


def zeros(*size, dtype="float32", name=None, requires_grad=False, batch_dim=None):
    return empty(*size, dtype=dtype, name=name, requires_grad=requires_grad, batch_dim=batch_dim)


def full(size, fill_value, dtype="float32", name=None, requires_grad=False, batch_dim=None, device=None):
    """torch.full's form; `device` is accepted for torch code and ignored (Samba has one device)."""
    t = call_op("full", [], {"shape": list(size), "value": float(fill_value), "dtype": dtype})
    return _finish(t, name, requires_grad, batch_dim)


def ones(*size, dtype="float32", name=None, requires_grad=False, batch_dim=None):
    return full(_shape(size), 1.0, dtype=dtype, name=name, requires_grad=requires_grad, batch_dim=batch_dim)


def arange(start, end=None, step=1, dtype=None, name=None, requires_grad=False, device=None):
    """torch.arange's form; `device` is accepted for torch code and ignored (Samba has one device)."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = "int64" if all(isinstance(v, int) for v in (start, end, step)) else "float32"
    t = call_op("arange", [], {"start": float(start), "end": float(end), "step": float(step), "dtype": dtype})
    return _finish(t, name, requires_grad)


def _random(op, size, attrs, dtype, name, requires_grad, batch_dim):
    seed, stream = session.random_stream()
    attrs = dict(attrs, shape=list(_shape(size)), seed=seed & 0x7FFFFFFFFFFFFFFF, offset=stream, dtype=dtype)
    return _finish(call_op(op, [], attrs), name, requires_grad, batch_dim)


def rand(*size, dtype="float32", name=None, requires_grad=False, batch_dim=None):
    return _random("rand", size, {}, dtype, name, requires_grad, batch_dim)


def randn(*size, dtype="float32", name=None, requires_grad=False, batch_dim=None):
    return _random("randn", size, {}, dtype, name, requires_grad, batch_dim)


def randint(*args, size=None, dtype="int64", name=None, requires_grad=False, batch_dim=None, low=None,
            high=None):
    """torch.randint: randint(high, size) or randint(low, high, size); integers in [low, high)."""
    args = list(args)
    if size is None and args and isinstance(args[-1], (tuple, list)):
        size = tuple(args.pop())
    if high is None:
        if len(args) == 2:
            low, high = args
        elif len(args) == 1:
            high = args[0]
        else:
            raise TypeError("randint(low=0, high, size): high and size are required")
    if size is None:
        raise TypeError("randint(low=0, high, size): size is required")
    return _random("randint", (tuple(size),), {"low": int(low or 0), "high": int(high)}, dtype, name,
                   requires_grad, batch_dim)


def normal(mean, std, size, dtype="float32", name=None, requires_grad=False, batch_dim=None):
    return _random("normal", (tuple(size),), {"mean": float(mean), "std": float(std)}, dtype, name,
                   requires_grad, batch_dim)


def parameter(name, shape, materializer="linear_weight", dtype="float32", **params):
    """A named parameter whose values come from a materializer: a placeholder
    in lazy parameter mode (session.enable_lazy_param), materialized otherwise."""
    m = Materializer(materializer, **params) if isinstance(materializer, str) else materializer_of(materializer)
    shape = tuple(shape)
    arr = (ctypes.c_int64 * max(1, len(shape)))(*shape)
    h = out_handle("samba_session_create_parameter", session.handle, name.encode(),
                   ctypes.c_int32(dtypes.from_name(dtype)), arr, ctypes.c_size_t(len(shape)), m.handle)
    return SambaTensor._wrap(h, keep=m)
