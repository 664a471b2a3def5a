"""SambaTensor: a refcounted handle to a Samba tensor with SambaFlow's
constructor, identity (sn_name, region, requires_grad, grad), host data
shared with numpy and torch without copies, and device access (sn_data,
sn_grad, cpu, rdu). Operators, conversions and views are in tensor_ops.py."""
import ctypes

from . import dtypes
from ._lib import NativeHandle, P, call, default_session, handles, out_handle
from .dlpack import handle_from_dlpack, to_dlpack
from .lazy import Materializer
from .tensor_ops import TensorOps
from .torch_dispatch import dispatch, torch_module
from .torch_surface import TorchSurface

_i64p = ctypes.POINTER(ctypes.c_int64)
_MEM_TYPES = {None: -1, "auto": -1, "ddr": 0, "hbm": 1, "host": 2}
_MEM_NAMES = {-1: None, 0: "DDR", 1: "HBM", 2: "HOST"}


def _flag(fn, h):
    out = ctypes.c_int32()
    call(fn, h, ctypes.byref(out))
    return bool(out.value)


class SambaTensor(TorchSurface, TensorOps, NativeHandle, release="samba_tensor_release"):
    """SambaTensor(torch_tensor=None, shape=None, dtype=None, name=None,
    batch_dim=None, named_dims=None, sized_dims=None, materializer=None,
    is_complex=None, region_name=None).

    From a torch tensor, numpy array or SambaTensor the new tensor shares its
    memory; from shape and dtype it is empty (no host data: enough to trace,
    and filled by its materializer when one is given)."""

    __slots__ = ("_keep", "__weakref__")
    __array_priority__ = 1000

    def __init__(self, torch_tensor=None, shape=None, dtype=None, name=None, batch_dim=None, named_dims=None,
                 sized_dims=None, materializer=None, is_complex=None, region_name=None, requires_grad=None):
        self._h = None
        self._keep = None
        if torch_tensor is not None and shape is not None:
            raise ValueError("SambaTensor: give either torch_tensor or shape (with dtype), not both")
        if torch_tensor is not None:
            src = _from_any(torch_tensor)
            call("samba_tensor_retain", src._h)
            self._h, self._keep = ctypes.c_void_p(src._h.value), src._keep
        elif shape is not None:
            shape = (shape,) if isinstance(shape, int) else tuple(shape)
            code = dtypes.float32 if dtype is None else dtypes.from_name(dtype)
            arr = (ctypes.c_int64 * max(1, len(shape)))(*shape)
            self._h = out_handle("samba_tensor_create", ctypes.c_int32(code), arr, ctypes.c_size_t(len(shape)))
            call("samba_tensor_clear_data", self._h)
        else:
            raise ValueError("SambaTensor needs torch_tensor (a torch tensor, numpy array or SambaTensor) or "
                             "shape and dtype")
        if name:
            ## The name given at construction (stored through the sn_name property).
            self.sn_name = name
        if region_name:
            ## The region given at construction (stored through the sn_region_name property).
            self.sn_region_name = region_name
        if materializer is not None:
            ## The materializer given at construction (stored through the materializer property).
            self.materializer = materializer
        if requires_grad is not None:
            ## The requires_grad given at construction (stored through the requires_grad property).
            self.requires_grad = requires_grad

    @classmethod
    def _wrap(cls, handle, keep=None):
        """A SambaTensor owning `handle` (an OWNED reference from the C ABI)."""
        if not handle:
            raise ValueError("SambaTensor._wrap: NULL handle")
        t = object.__new__(cls)
        # Array elements of void* come back as ints: keep every handle a
        # c_void_p so ctypes never passes it as a 32-bit int.
        t._h = handle if isinstance(handle, ctypes.c_void_p) else ctypes.c_void_p(handle)
        t._keep = keep
        return t

    @classmethod
    def _borrowed(cls, handle):
        """A SambaTensor for a BORROWED handle (takes its own reference)."""
        call("samba_tensor_retain", P(handle))
        return cls._wrap(P(handle))

    @staticmethod
    def _coerce(value):
        return as_tensor(value)

    # ---- metadata --------------------------------------------------------------------
    @property
    def shape(self):
        """The sizes of the dimensions, as a tuple (torch's Tensor.shape)."""
        dims, n = _i64p(), ctypes.c_size_t()
        call("samba_tensor_shape", self._h, ctypes.byref(dims), ctypes.byref(n))
        return tuple(dims[i] for i in range(n.value))

    def size(self, dim=None):
        """The shape, or the size of dimension `dim` (torch's Tensor.size)."""
        return self.shape if dim is None else self.shape[dim]

    def stride(self, dim=None):
        """The strides in elements, or the stride of dimension `dim` (torch's Tensor.stride)."""
        s, n = _i64p(), ctypes.c_size_t()
        call("samba_tensor_strides", self._h, ctypes.byref(s), ctypes.byref(n))
        st = tuple(s[i] for i in range(n.value))
        return st if dim is None else st[dim]

    def dim(self):
        """The number of dimensions (torch's Tensor.dim)."""
        out = ctypes.c_size_t()
        call("samba_tensor_ndim", self._h, ctypes.byref(out))
        return out.value

    ## torch's other name of dim().
    ndimension = dim

    @property
    def ndim(self):
        """The number of dimensions, as a property (torch's Tensor.ndim)."""
        return self.dim()

    @property
    def samba_dtype(self):
        """The Samba DType (an int code that also compares equal to its names)."""
        out = ctypes.c_int32()
        call("samba_tensor_dtype", self._h, ctypes.byref(out))
        return dtypes.ALL[out.value]

    @property
    def dtype(self):
        """A torch.dtype when torch imports, as models pass it to torch.finfo, torch.full
        and .to(); the Samba DType otherwise. Both compare equal to samba.float32 and the like."""
        return dtypes.public(self.samba_dtype)

    def numel(self):
        """The number of elements (torch's Tensor.numel)."""
        out = ctypes.c_int64()
        call("samba_tensor_numel", self._h, ctypes.byref(out))
        return out.value

    ## torch's other name of numel().
    nelement = numel

    @property
    def nbytes(self):
        """The size of the elements in bytes (torch's Tensor.nbytes)."""
        out = ctypes.c_size_t()
        call("samba_tensor_nbytes", self._h, ctypes.byref(out))
        return out.value

    def element_size(self):
        """Bytes per element (torch's Tensor.element_size)."""
        out = ctypes.c_size_t()
        call("samba_tensor_element_size", self._h, ctypes.byref(out))
        return out.value

    def is_contiguous(self):
        """Whether the elements are laid out row-major without gaps (torch's Tensor.is_contiguous)."""
        return _flag("samba_tensor_is_contiguous", self._h)

    def is_floating_point(self):
        """Whether the dtype is a floating-point one (torch's Tensor.is_floating_point)."""
        return _flag("samba_tensor_is_floating_point", self._h)

    def data_ptr(self):
        """The address of the first element on the host, 0 when there is no data yet."""
        out = P()
        call("samba_tensor_data", self._h, ctypes.byref(out))
        return out.value or 0

    @property
    def device(self):
        """Host tensors live in host memory: 'cpu' (a torch.device when torch imports)."""
        try:
            return torch_module().device("cpu")
        except ImportError:
            return "cpu"

    # ---- identity --------------------------------------------------------------------
    def _get_str(self, fn):
        out = ctypes.c_char_p()
        call(fn, self._h, ctypes.byref(out))
        return out.value.decode() if out.value else ""

    @property
    def sn_name(self):
        """The tensor's name in the traced graph and the PEF (SambaFlow's sn_name)."""
        return self._get_str("samba_tensor_name")

    @sn_name.setter
    def sn_name(self, name):
        """Names the tensor in the traced graph and the PEF; None or "" clears the name."""
        call("samba_tensor_set_name", self._h, (name or "").encode())

    @property
    def sn_grad_name(self):
        """The name of this tensor's gradient in a PEF ('<sn_name>.grad')."""
        return f"{self.sn_name}.grad" if self.sn_name else ""

    @property
    def sn_region_name(self):
        """The memory region the tensor is placed in on the device ("" for the compiler's choice)."""
        return self._get_str("samba_tensor_region_name")

    @sn_region_name.setter
    def sn_region_name(self, name):
        """Places the tensor in memory region `name`; None or "" leaves it to the compiler."""
        call("samba_tensor_set_region_name", self._h, (name or "").encode())

    @property
    def requires_grad(self):
        """Whether gradients are computed for this tensor (torch's Tensor.requires_grad)."""
        return _flag("samba_tensor_requires_grad", self._h)

    @requires_grad.setter
    def requires_grad(self, v):
        """Sets whether gradients are computed for this tensor."""
        call("samba_tensor_set_requires_grad", self._h, ctypes.c_int32(1 if v else 0))

    def requires_grad_(self, requires_grad=True):
        """Sets requires_grad in place and returns this tensor (torch's Tensor.requires_grad_)."""
        self.requires_grad = requires_grad
        return self

    @property
    def is_parameter(self):
        """Whether the tensor is a model parameter (traced as a weight, updated by optimizers)."""
        return _flag("samba_tensor_is_parameter", self._h)

    @is_parameter.setter
    def is_parameter(self, v):
        """Marks the tensor as a model parameter, or not."""
        call("samba_tensor_set_parameter", self._h, ctypes.c_int32(1 if v else 0))

    @property
    def mem_type(self):
        """'DDR', 'HBM', 'HOST', or None (the compiler decides)."""
        out = ctypes.c_int32()
        call("samba_tensor_mem_type", self._h, ctypes.byref(out))
        return _MEM_NAMES[out.value]

    @mem_type.setter
    def mem_type(self, v):
        """Sets the memory type: 'DDR', 'HBM', 'HOST' (any case) or None.

        Raises ValueError for any other value."""
        key = v.lower() if isinstance(v, str) else v
        if key not in _MEM_TYPES:
            raise ValueError(f"mem_type must be 'DDR', 'HBM', 'HOST' or None, got {v!r}")
        call("samba_tensor_set_mem_type", self._h, ctypes.c_int32(_MEM_TYPES[key]))

    @property
    def grad(self):
        """The gradient accumulated by backward(), or None (torch's Tensor.grad)."""
        h = P()
        call("samba_tensor_grad", self._h, ctypes.byref(h))
        if not h:
            return None
        call("samba_tensor_retain", h)  # BORROWED: take our own reference
        return SambaTensor._wrap(h)

    @grad.setter
    def grad(self, g):
        """Sets the gradient (anything as_tensor takes), or clears it with None."""
        g = None if g is None else as_tensor(g)
        call("samba_tensor_set_grad", self._h, g._h if g is not None else None)

    def backward(self, gradient=None, retain_graph=None):
        """Computes the gradients of this tensor with respect to the graph's leaves (torch's Tensor.backward).

        `gradient` is the incoming gradient (needed unless the tensor has one element);
        `retain_graph` keeps the graph for another backward()."""
        g = None if gradient is None else as_tensor(gradient)
        call("samba_tensor_backward", self._h, g._h if g is not None else None,
             ctypes.c_int32(1 if retain_graph else 0))

    # ---- lazy parameters, pinned memory ------------------------------------------------
    def has_data(self):
        """Whether the tensor holds host data (a lazily created parameter has none until materialized)."""
        return _flag("samba_tensor_has_data", self._h)

    def materialize_(self):
        """Gives the tensor its values by running its materializer; returns this tensor."""
        call("samba_tensor_materialize_", self._h)
        return self

    @property
    def materializer(self):
        """The Materializer that gives this tensor its initial values, or None."""
        h = out_handle("samba_tensor_materializer", self._h)
        return Materializer(h) if h else None

    @materializer.setter
    def materializer(self, m):
        """Sets the materializer (a Materializer, a built-in's name, or fn(tensor, rng)), or clears it with None."""
        m = None if m is None else materializer_of(m)
        call("samba_tensor_set_materializer", self._h, m.handle if m is not None else None)
        if m is not None:
            # A custom materializer's callback must live as long as the tensor.
            self._keep = (self._keep, m)

    @property
    def materializer_provided(self):
        """Whether a materializer is set (SambaFlow's name for `materializer is not None`)."""
        return self.materializer is not None

    @property
    def fast_access(self):
        """Whether the tensor is fast access: in pinned memory, transferred without staging."""
        return _flag("samba_tensor_fast_access", self._h)

    @fast_access.setter
    def fast_access(self, v):
        """With True, moves memory the engine owns into pinned memory so transfers need no staging
        (the data pointer changes; borrowed memory stays); the name is recorded in the default session."""
        call("samba_tensor_set_fast_access", default_session.handle, self._h, ctypes.c_int32(1 if v else 0))

    @staticmethod
    def is_fast_access(name):
        """Whether the tensor named `name` is fast access in the default session
        (set on a tensor, by name, or by trace_graph)."""
        out = ctypes.c_int32()
        call("samba_session_is_fast_access", default_session.handle, name.encode(), ctypes.byref(out))
        return bool(out.value)

    def reusable(self):
        """Whether host-to-device transfers can use the tensor's memory directly (contiguous, with data)."""
        return _flag("samba_tensor_reusable", self._h)

    # ---- host data: numpy, DLPack, torch ----------------------------------------------
    @property
    def __array_interface__(self):
        return {"shape": self.shape, "typestr": dtypes.NUMPY[self.samba_dtype], "version": 3,
                "data": (self.data_ptr(), False),
                "strides": tuple(s * self.element_size() for s in self.stride())}

    def numpy(self):
        """A numpy array sharing this tensor's memory (bfloat16 shows as raw uint16)."""
        import numpy as np  # optional: only array conversions need it, so it is imported on first use
        return np.asarray(self)

    def __dlpack__(self, stream=None):
        return to_dlpack(self)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU

    def torch(self):
        """The torch tensor sharing this tensor's memory (the original one when
        the SambaTensor was made from a torch tensor)."""
        return torch_view(self)

    def torch_tensor(self):
        """torch(), after materializing a tensor that has no data yet."""
        if not self.has_data():
            self.materialize_()
        return self.torch()

    @property
    def data(self):
        """The host values: a torch tensor sharing memory when torch imports, else a numpy array."""
        try:
            torch_module()
        except ImportError:
            return self.numpy()
        return self.torch()

    @data.setter
    def data(self, values):
        """Replaces the host values with `values` (anything as_tensor takes) of the same shape, converted
        to this tensor's dtype. Raises ValueError when the shapes differ."""
        v = as_tensor(values)
        if v.shape != self.shape:
            raise ValueError(f"data: the new values have shape {v.shape}; this tensor's is {self.shape}")
        src = v.to(self.samba_dtype).contiguous()
        call("samba_tensor_copy_from", self._h, ctypes.c_void_p(src.data_ptr()), ctypes.c_size_t(src.nbytes))

    def clear_data(self):
        """Drops the host data (the tensor keeps its shape and dtype)."""
        call("samba_tensor_clear_data", self._h)

    def tolist(self):
        """The values as nested Python lists (torch's Tensor.tolist)."""
        return self.numpy().tolist()

    def item(self):
        """The value of a one-element tensor as a Python number or bool (torch's Tensor.item)."""
        if self.is_floating_point():
            out = ctypes.c_double()
            call("samba_tensor_item", self._h, ctypes.byref(out))
        else:
            out = ctypes.c_int64()
            call("samba_tensor_item_int", self._h, ctypes.byref(out))
        return bool(out.value) if dtypes.bool_ == self.samba_dtype else out.value

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.is_floating_point():
            raise TypeError("only integer SambaTensors can be used as an index")
        return int(self.item())

    def __bool__(self):
        if self.numel() != 1:
            raise ValueError(f"the truth value of a SambaTensor with {self.numel()} elements is ambiguous")
        return bool(self.item())

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d SambaTensor")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __repr__(self):
        try:
            values = self.numpy().tolist() if self.has_data() else "<no data>"
        except Exception:  # noqa: BLE001 - repr must not fail
            values = "<unreadable>"
        return f"SambaTensor({values}, dtype={self.samba_dtype!r}, sn_name='{self.sn_name}')"

    # ---- device (the loaded PEF of the default session) --------------------------------
    def cpu(self, inplace=False):
        """Copies the device value (and gradient) into this tensor's host data."""
        call("samba_tensor_cpu", default_session.handle, self._h)
        return self

    def cpu_(self):
        """cpu(inplace=True): copies the device value (and gradient) into this tensor's host data."""
        return self.cpu(inplace=True)

    def rdu(self):
        """Copies the host value (and gradient) to the device."""
        call("samba_tensor_rdu", default_session.handle, self._h)
        return self

    @property
    def sn_data(self):
        """The tensor's values on the device (of the default session), as a new host tensor."""
        return SambaTensor._wrap(out_handle("samba_tensor_sn_data", default_session.handle, self._h))

    @sn_data.setter
    def sn_data(self, values):
        """Writes `values` (anything as_tensor takes) to the tensor's device memory."""
        v = as_tensor(values)
        call("samba_tensor_set_sn_data", default_session.handle, self._h, v._h)

    @property
    def sn_grad(self):
        """The tensor's gradient on the device (of the default session), as a new host tensor."""
        return SambaTensor._wrap(out_handle("samba_tensor_sn_grad", default_session.handle, self._h))

    @sn_grad.setter
    def sn_grad(self, values):
        """Writes `values` (anything as_tensor takes) to the tensor's gradient on the device."""
        v = as_tensor(values)
        call("samba_tensor_set_sn_grad", default_session.handle, self._h, v._h)

    # ---- PyTorch interop ---------------------------------------------------------------
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return dispatch(cls, func, args, kwargs or {})


def scalar(value):
    """A 0-dimensional tensor of a Python number that promotes like a Python scalar (int64 for ints
    and bools, float64 for floats, but an int8 tensor + an int stays int8)."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        return SambaTensor._wrap(out_handle("samba_scalar_int", ctypes.c_int64(value)))
    return SambaTensor._wrap(out_handle("samba_scalar_float", ctypes.c_double(float(value))))


def _from_any(value):
    """A SambaTensor sharing `value`'s memory where it has any (SambaTensor,
    torch tensor, DLPack producer, numpy array), else holding a copy."""
    if isinstance(value, SambaTensor):
        return value
    if isinstance(value, (int, float, bool)):
        return scalar(value)
    if type(value).__module__.startswith("torch"):
        return from_torch_tensor(value)
    if hasattr(value, "__array_interface__") or hasattr(value, "__array__"):
        return from_numpy(value)
    if hasattr(value, "__dlpack__"):
        return from_dlpack(value)
    return from_numpy(value)


def as_tensor(value):
    """A SambaTensor for a SambaTensor, Python number, torch tensor or array-like."""
    return value if isinstance(value, SambaTensor) else _from_any(value)


def from_numpy(array, name=None):
    """A tensor sharing the memory of a numpy array (kept alive by the tensor)."""
    import numpy as np  # optional: only array conversions need it, so it is imported on first use
    arr = np.asarray(array)
    if not arr.flags.aligned or arr.dtype.byteorder == ">":
        arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))
    if arr.dtype == np.float64 and not isinstance(array, np.ndarray):
        arr = arr.astype(np.float32)  # Python lists of floats become float32, as in torch
    code = dtypes.FROM_NUMPY.get(arr.dtype.name)
    if code is None:
        raise TypeError(f"numpy dtype {arr.dtype} has no Samba dtype; expected one of {sorted(dtypes.FROM_NUMPY)}")
    if any(s % arr.itemsize for s in arr.strides) or any(s < 0 for s in arr.strides):
        arr = np.ascontiguousarray(arr)
    shape = (ctypes.c_int64 * max(1, arr.ndim))(*arr.shape)
    strides = (ctypes.c_int64 * max(1, arr.ndim))(*[s // arr.itemsize for s in arr.strides])
    ptr = ctypes.c_void_p(arr.ctypes.data)
    h = out_handle("samba_tensor_wrap", ptr, ctypes.c_int32(code), shape, ctypes.c_size_t(arr.ndim), strides)
    t = SambaTensor._wrap(h, keep=arr)
    if name:
        t.sn_name = name
    return t


def to_handles(tensors):
    """The C handles of SambaTensors `tensors`, as an array for the C API."""
    return handles([t._h for t in tensors])


def from_dlpack(obj, as_bool=False):
    """A SambaTensor sharing the memory of any object with __dlpack__ (or a DLPack capsule)."""
    return SambaTensor._wrap(handle_from_dlpack(obj, as_bool))


def from_torch_tensor(tensor, name=None, batch_dim=None, named_dims=None, region_name=None):
    """A SambaTensor sharing the torch tensor's memory (a SambaTensor is returned as is)."""
    if tensor is None or isinstance(tensor, SambaTensor):
        return tensor
    torch = torch_module()
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"from_torch_tensor: expected a torch.Tensor or SambaTensor, got {type(tensor).__name__}")
    source = tensor.detach()
    # Through DLPack the engine owns a reference to torch's memory, so a mask made
    # inside a traced forward outlives the torch tensor as a graph constant.
    is_bool = source.dtype == torch.bool
    t = from_dlpack(torch.utils.dlpack.to_dlpack(source.view(torch.uint8) if is_bool else source), as_bool=is_bool)
    t._keep = tensor
    if tensor.requires_grad and tensor.is_leaf:
        t.requires_grad = True
    if name:
        t.sn_name = name
    if region_name:
        t.sn_region_name = region_name
    return t


def torch_view(t):
    """The torch tensor sharing a SambaTensor's memory."""
    torch = torch_module()
    keep = t._keep
    if isinstance(keep, torch.Tensor) and keep.data_ptr() == t.data_ptr() and tuple(keep.shape) == t.shape \
            and keep.stride() == t.stride():
        return keep
    if t.samba_dtype == dtypes.bool_:
        return torch.from_numpy(t.numpy())
    return torch.utils.dlpack.from_dlpack(to_dlpack(t))


def _filling_from_result(fn):
    """fn(tensor, rng) in the seed's form returns the values (a torch tensor,
    numpy array or SambaTensor); Samba's form fills `tensor` and returns None.
    Both are accepted: returned values are copied into the parameter, so they
    are never dropped silently."""

    def fill(t, rng):
        values = fn(t, rng)
        if values is None:
            return
        v = as_tensor(values)
        if v.shape != t.shape or v.dtype != t.dtype:
            raise ValueError(f"materializer for '{t.sn_name}' returned a tensor of shape {v.shape} and dtype "
                             f"{v.dtype}; the parameter is {t.shape} {t.dtype}")
        t.data = v

    return fill


def materializer_of(m):
    """A Materializer for a Materializer, a built-in's name, or fn(tensor, rng)."""
    if isinstance(m, Materializer):
        return m
    if isinstance(m, str):
        return Materializer(m)
    return Materializer.custom(_filling_from_result(m), SambaTensor._borrowed)
