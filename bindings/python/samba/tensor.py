"""SambaTensor: a refcounted handle to a Samba tensor, with numpy sharing,
operators that compute on the host or trace while compiling, and the
SambaTensor methods of SambaFlow."""
import ctypes

from . import dtypes
from ._lib import P, call, handles, lib, out_handle

_i64p = ctypes.POINTER(ctypes.c_int64)


def _flag(fn, h):
    out = ctypes.c_int32()
    call(fn, h, ctypes.byref(out))
    return bool(out.value)


class SambaTensor:
    """A tensor: dtype, shape and strides over refcounted storage, plus its
    identity (sn_name, region, requires_grad, grad)."""

    __slots__ = ("_h", "_keep", "__weakref__")
    __array_priority__ = 1000

    def __init__(self, handle, keep=None):
        if not handle:
            raise ValueError("SambaTensor needs a handle; create tensors with samba.zeros, samba.from_numpy, ...")
        # Array elements of void* come back as ints: keep every handle a
        # c_void_p so ctypes never passes it as a 32-bit int.
        self._h = handle if isinstance(handle, ctypes.c_void_p) else ctypes.c_void_p(handle)
        self._keep = keep

    def __del__(self):
        h = getattr(self, "_h", None)
        if h and lib is not None:
            lib.samba_tensor_release(h)
            self._h = None

    @property
    def handle(self):
        return self._h

    # ---- metadata --------------------------------------------------------------------
    @property
    def shape(self):
        dims, n = _i64p(), ctypes.c_size_t()
        call("samba_tensor_shape", self._h, ctypes.byref(dims), ctypes.byref(n))
        return tuple(dims[i] for i in range(n.value))

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def stride(self, dim=None):
        s, n = _i64p(), ctypes.c_size_t()
        call("samba_tensor_strides", self._h, ctypes.byref(s), ctypes.byref(n))
        st = tuple(s[i] for i in range(n.value))
        return st if dim is None else st[dim]

    def dim(self):
        return len(self.shape)

    ndimension = dim

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def dtype(self):
        out = ctypes.c_int32()
        call("samba_tensor_dtype", self._h, ctypes.byref(out))
        return out.value

    def numel(self):
        out = ctypes.c_int64()
        call("samba_tensor_numel", self._h, ctypes.byref(out))
        return out.value

    def element_size(self):
        return dtypes.size(self.dtype)

    def is_contiguous(self):
        return _flag("samba_tensor_is_contiguous", self._h)

    def is_floating_point(self):
        return self.dtype in (dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16)

    def data_ptr(self):
        out = P()
        call("samba_tensor_data", self._h, ctypes.byref(out))
        return out.value or 0

    # ---- identity --------------------------------------------------------------------
    def _get_str(self, fn):
        out = ctypes.c_char_p()
        call(fn, self._h, ctypes.byref(out))
        return out.value.decode() if out.value else ""

    @property
    def sn_name(self):
        return self._get_str("samba_tensor_name")

    @sn_name.setter
    def sn_name(self, name):
        call("samba_tensor_set_name", self._h, name.encode())

    @property
    def sn_region_name(self):
        return self._get_str("samba_tensor_region_name")

    @sn_region_name.setter
    def sn_region_name(self, name):
        call("samba_tensor_set_region_name", self._h, name.encode())

    @property
    def requires_grad(self):
        return _flag("samba_tensor_requires_grad", self._h)

    @requires_grad.setter
    def requires_grad(self, v):
        call("samba_tensor_set_requires_grad", self._h, ctypes.c_int32(1 if v else 0))

    def requires_grad_(self, v=True):
        self.requires_grad = v
        return self

    @property
    def grad(self):
        h = out_handle("samba_tensor_grad", self._h)
        if not h:
            return None
        call("samba_tensor_retain", h)  # the C call lends the gradient
        return SambaTensor(h)

    @grad.setter
    def grad(self, g):
        call("samba_tensor_set_grad", self._h, g._h if g is not None else None)

    def backward(self, gradient=None):
        call("samba_tensor_backward", self._h, gradient._h if gradient is not None else None)

    # ---- lazy parameters, pinned memory ------------------------------------------------
    def has_data(self):
        return _flag("samba_tensor_has_data", self._h)

    def materialize_(self):
        call("samba_tensor_materialize_", self._h)

    @property
    def materializer(self):
        from .lazy import Materializer
        h = out_handle("samba_tensor_materializer", self._h)
        return Materializer(h) if h else None

    @materializer.setter
    def materializer(self, m):
        from .lazy import Materializer
        if m is not None and not isinstance(m, Materializer):
            m = Materializer.custom(m)
        call("samba_tensor_set_materializer", self._h, m.handle if m is not None else None)
        if m is not None:
            # A custom materializer's callback must live as long as the tensor.
            self._keep = (self._keep, m)

    @property
    def fast_access(self):
        return _flag("samba_tensor_fast_access", self._h)

    @fast_access.setter
    def fast_access(self, v):
        from .session import session
        call("samba_tensor_set_fast_access", session.handle, self._h, ctypes.c_int32(1 if v else 0))

    @staticmethod
    def is_fast_access(name):
        from .session import session
        out = ctypes.c_int32()
        call("samba_session_is_fast_access", session.handle, name.encode(), ctypes.byref(out))
        return bool(out.value)

    def reusable(self):
        return _flag("samba_tensor_reusable", self._h)

    # ---- data ------------------------------------------------------------------------
    @property
    def __array_interface__(self):
        return {"shape": self.shape, "typestr": dtypes.NUMPY[self.dtype], "version": 3,
                "data": (self.data_ptr(), False),
                "strides": tuple(s * self.element_size() for s in self.stride())}

    def numpy(self):
        """A numpy array sharing this tensor's memory (keeps the tensor alive)."""
        import numpy as np
        arr = np.asarray(self)
        return arr

    def __dlpack__(self, stream=None):
        from .dlpack import to_dlpack
        return to_dlpack(self)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU

    def tolist(self):
        return self.numpy().tolist()

    def item(self):
        if self.is_floating_point():
            out = ctypes.c_double()
            call("samba_tensor_item", self._h, ctypes.byref(out))
        else:
            out = ctypes.c_int64()
            call("samba_tensor_item_int", self._h, ctypes.byref(out))
        return bool(out.value) if self.dtype == dtypes.bool_ else out.value

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        try:
            values = self.numpy().tolist() if self.has_data() else "<no data>"
        except Exception:  # noqa: BLE001 - repr must not fail
            values = "<unreadable>"
        return f"SambaTensor({values}, dtype={dtypes.name(self.dtype)}, sn_name='{self.sn_name}')"

    # ---- conversions and views -------------------------------------------------------
    def _unary(self, fn, *args):
        return SambaTensor(out_handle(fn, self._h, *args))

    def to(self, dtype):
        return self._unary("samba_tensor_to", ctypes.c_int32(dtypes.from_name(dtype)))

    def type(self, dtype=None):
        return dtypes.name(self.dtype) if dtype is None else self.to(dtype)

    def type_as(self, other):
        return self._unary("samba_tensor_type_as", other._h)

    def float(self):
        return self._unary("samba_tensor_float")

    def bfloat16(self):
        return self._unary("samba_tensor_bfloat16")

    def int(self):
        return self._unary("samba_tensor_int")

    def long(self):
        return self._unary("samba_tensor_long")

    def short(self):
        return self._unary("samba_tensor_short")

    def bool(self):
        return self._unary("samba_tensor_bool")

    def contiguous(self):
        return self._unary("samba_tensor_contiguous")

    def clone(self):
        return self._unary("samba_tensor_clone")

    def detach(self):
        return self._unary("samba_tensor_detach")

    def clear_data(self):
        call("samba_tensor_clear_data", self._h)

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        arr = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        return self._unary("samba_tensor_reshape", arr, ctypes.c_size_t(len(shape)))

    view = reshape

    def view_as(self, other):
        return self._unary("samba_tensor_view_as", other._h)

    def permute(self, *dims):
        dims = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        arr = (ctypes.c_int64 * max(1, len(dims)))(*dims)
        return self._unary("samba_tensor_permute", arr, ctypes.c_size_t(len(dims)))

    def t(self):
        return self._unary("samba_tensor_t")

    @property
    def T(self):  # noqa: N802 - torch's name
        return self.permute(*reversed(range(self.dim())))

    def _new(self, fn, shape, value, dtype, requires_grad):
        shape = tuple(shape)
        arr = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        extra = () if value is None else (ctypes.c_double(value),)
        code = self.dtype if dtype is None else dtypes.from_name(dtype)
        return self._unary(fn, arr, ctypes.c_size_t(len(shape)), *extra, ctypes.c_int32(code),
                           ctypes.c_int32(1 if requires_grad else 0))

    def new_empty(self, size, dtype=None, requires_grad=False):
        return self._new("samba_tensor_new_empty", size, None, dtype, requires_grad)

    def new_zeros(self, size, dtype=None, requires_grad=False):
        return self._new("samba_tensor_new_zeros", size, None, dtype, requires_grad)

    def new_ones(self, size, dtype=None, requires_grad=False):
        return self._new("samba_tensor_new_ones", size, None, dtype, requires_grad)

    def new_full(self, size, fill_value, dtype=None, requires_grad=False):
        return self._new("samba_tensor_new_full", size, fill_value, dtype, requires_grad)

    # ---- device ----------------------------------------------------------------------
    def cpu(self):
        from .session import session
        call("samba_tensor_cpu", session.handle, self._h)
        return self

    def rdu(self):
        from .session import session
        call("samba_tensor_rdu", session.handle, self._h)
        return self

    @property
    def sn_data(self):
        from .session import session
        return SambaTensor(out_handle("samba_tensor_sn_data", session.handle, self._h))

    @sn_data.setter
    def sn_data(self, values):
        from .session import session
        v = as_tensor(values)
        call("samba_tensor_set_sn_data", session.handle, self._h, v._h)

    @property
    def sn_grad(self):
        from .session import session
        return SambaTensor(out_handle("samba_tensor_sn_grad", session.handle, self._h))

    @sn_grad.setter
    def sn_grad(self, values):
        from .session import session
        v = as_tensor(values)
        call("samba_tensor_set_sn_grad", session.handle, self._h, v._h)

    # ---- indexing --------------------------------------------------------------------
    def _index(self, key):
        from .indexing import build_index
        return build_index(key)

    def __getitem__(self, key):
        idx = self._index(key)
        try:
            return SambaTensor(out_handle("samba_tensor_index", self._h, idx))
        finally:
            lib.samba_index_release(idx)

    def __setitem__(self, key, value):
        idx = self._index(key)
        try:
            v = as_tensor(value)
            call("samba_tensor_index_put", self._h, idx, v._h)
        finally:
            lib.samba_index_release(idx)

    # ---- operators -------------------------------------------------------------------
    def _op(self, name, other=None, reverse=False):
        from .ops import call_op
        if other is None:
            return call_op(name, [self])
        other = as_tensor(other)
        return call_op(name, [other, self] if reverse else [self, other])

    def __add__(self, o): return self._op("add", o)
    def __radd__(self, o): return self._op("add", o, True)
    def __sub__(self, o): return self._op("sub", o)
    def __rsub__(self, o): return self._op("sub", o, True)
    def __mul__(self, o): return self._op("mul", o)
    def __rmul__(self, o): return self._op("mul", o, True)
    def __truediv__(self, o): return self._op("div", o)
    def __rtruediv__(self, o): return self._op("div", o, True)
    def __pow__(self, o): return self._op("pow", o)
    def __rpow__(self, o): return self._op("pow", o, True)
    def __matmul__(self, o): return self._op("matmul", o)
    def __rmatmul__(self, o): return self._op("matmul", o, True)
    def __neg__(self): return self._op("neg")
    def __abs__(self): return self._op("abs")
    def __eq__(self, o): return self._op("eq", o)  # noqa: E704
    def __ne__(self, o): return self._op("ne", o)
    def __lt__(self, o): return self._op("lt", o)
    def __le__(self, o): return self._op("le", o)
    def __gt__(self, o): return self._op("gt", o)
    def __ge__(self, o): return self._op("ge", o)
    def __and__(self, o): return self._op("logical_and" if self.dtype == dtypes.bool_ else "bitwise_and", o)
    def __or__(self, o): return self._op("logical_or" if self.dtype == dtypes.bool_ else "bitwise_or", o)
    def __invert__(self): return self._op("logical_not" if self.dtype == dtypes.bool_ else "bitwise_not")

    __hash__ = object.__hash__

    def __getattr__(self, name):
        # Registry ops as methods: x.relu(), x.sum(dim=[1]), x.softmax(dim=1).
        from .ops import op_function
        fn = op_function(name)
        if fn is None:
            raise AttributeError(f"SambaTensor has no attribute or op '{name}'")
        return lambda *args, **kwargs: fn(self, *args, **kwargs)


def scalar(value):
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        return SambaTensor(out_handle("samba_scalar_int", ctypes.c_int64(value)))
    return SambaTensor(out_handle("samba_scalar_float", ctypes.c_double(float(value))))


def as_tensor(value):
    """A SambaTensor for a SambaTensor, a Python number or anything numpy can read."""
    if isinstance(value, SambaTensor):
        return value
    if isinstance(value, (int, float, bool)):
        return scalar(value)
    return from_numpy(value)


def from_numpy(array, name=None):
    """A tensor sharing the memory of a numpy array (kept alive by the tensor)."""
    import numpy as np
    arr = np.asarray(array)
    if not arr.flags.aligned or arr.dtype.byteorder == ">":
        arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))
    code = dtypes.FROM_NUMPY.get(arr.dtype.name)
    if code is None:
        raise TypeError(f"numpy dtype {arr.dtype} has no Samba dtype; expected one of {sorted(dtypes.FROM_NUMPY)}")
    if any(s % arr.itemsize for s in arr.strides) or any(s < 0 for s in arr.strides):
        arr = np.ascontiguousarray(arr)
    shape = (ctypes.c_int64 * max(1, arr.ndim))(*arr.shape)
    strides = (ctypes.c_int64 * max(1, arr.ndim))(*[s // arr.itemsize for s in arr.strides])
    ptr = ctypes.c_void_p(arr.ctypes.data)
    h = out_handle("samba_tensor_wrap", ptr, ctypes.c_int32(code), shape, ctypes.c_size_t(arr.ndim), strides)
    t = SambaTensor(h, keep=arr)
    if name:
        t.sn_name = name
    return t


def to_handles(tensors):
    return handles([t._h for t in tensors])
