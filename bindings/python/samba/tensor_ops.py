"""SambaTensor's operators, dtype conversions, views, new_* and indexing.
Every operator is a registry op: it computes on the host, or is recorded
while a model is being traced. TensorOps is SambaTensor's base: results are
made with the concrete class's _wrap and operands converted with its
_coerce, so this module needs nothing above it."""
import collections
import ctypes

from . import dtypes
from ._lib import SambaError
from ._lib import call, out_handle
from .indexing import build_index
from .ops import bind, call_native, is_op


def _dims(args):
    """(2, 3), ((2, 3),) and ([2, 3],) all mean the shape (2, 3)."""
    if len(args) == 1 and not isinstance(args[0], int):
        return tuple(int(d) for d in args[0])
    return tuple(int(d) for d in args)


def _i64_array(values):
    return (ctypes.c_int64 * max(1, len(values)))(*values), ctypes.c_size_t(len(values))


# torch.return_types' shapes: (values, indices) that unpack, index and name like torch's.
MaxResult = collections.namedtuple("max", ["values", "indices"])
MinResult = collections.namedtuple("min", ["values", "indices"])
SortResult = collections.namedtuple("sort", ["values", "indices"])
TopkResult = collections.namedtuple("topk", ["values", "indices"])
KthvalueResult = collections.namedtuple("kthvalue", ["values", "indices"])
MedianResult = collections.namedtuple("median", ["values", "indices"])

# Torch functions returning (values, indices) that no registry op computes yet.
UNSUPPORTED_VALUE_INDEX_FUNCTIONS = ("mode",)


class TensorOps:
    __slots__ = ()

    @classmethod
    def _call_op(cls, name, inputs, attrs=None):
        """Runs registry op `name` on tensors (None for an absent optional input)."""
        handles, single = call_native(name, [t.handle if t is not None else None for t in inputs], attrs)
        results = [cls._wrap(h) for h in handles]
        return results[0] if single else tuple(results)

    @classmethod
    def _call_bound(cls, name, args, kwargs):
        """Op `name` called as samba.<name>(*args, **kwargs)."""
        inputs, attrs = bind(name, args, kwargs)
        return cls._call_op(name, [None if v is None else cls._coerce(v) for v in inputs], attrs)

    def _unary(self, fn, *args):
        return self._wrap(out_handle(fn, self._h, *args))

    # ---- dtype conversions -----------------------------------------------------------
    def to(self, *args, **kwargs):
        """to(dtype) or to(other): this tensor in another dtype (itself when it has it)."""
        target = kwargs.get("dtype", args[0] if args else None)
        if target is None:
            return self
        if hasattr(target, "dtype") and not isinstance(target, (str, int)) and \
                not type(target).__name__ == "dtype":
            target = target.dtype
        if isinstance(target, str) and target in ("cpu", "rdu"):
            return self
        return self._unary("samba_tensor_to", ctypes.c_int32(dtypes.from_name(target)))

    def type(self, dtype=None, non_blocking=False, **kwargs):
        if non_blocking or kwargs:
            raise TypeError("type(): non_blocking and other keyword arguments are not supported on the device")
        return self.dtype.name if dtype is None else self.to(dtype)

    def type_as(self, tensor):
        return self._unary("samba_tensor_type_as", self._coerce(tensor)._h)

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

    # ---- views and copies --------------------------------------------------------------
    def contiguous(self):
        return self._unary("samba_tensor_contiguous")

    def clone(self):
        return self._unary("samba_tensor_clone")

    def detach(self):
        return self._unary("samba_tensor_detach")

    def reshape(self, *shape):
        return self._unary("samba_tensor_reshape", *_i64_array(_dims(shape)))

    view = reshape

    def view_as(self, other):
        return self._unary("samba_tensor_view_as", other._h)

    def reshape_as(self, other):
        return self.reshape(other.shape)

    def permute(self, *dims):
        return self._unary("samba_tensor_permute", *_i64_array(_dims(dims)))

    def t(self):
        return self._unary("samba_tensor_reverse_dims")

    @property
    def T(self):  # noqa: N802 - torch's name
        return self._unary("samba_tensor_reverse_dims")

    def _new(self, fn, size, value, dtype, requires_grad):
        shape = (size,) if isinstance(size, int) else tuple(size)
        extra = () if value is None else (ctypes.c_double(value),)
        code = -1 if dtype is None else dtypes.from_name(dtype)
        return self._unary(fn, *_i64_array(shape), *extra, ctypes.c_int32(code),
                           ctypes.c_int32(1 if requires_grad else 0))

    def new_empty(self, size, dtype=None, requires_grad=False):
        return self._new("samba_tensor_new_empty", size, None, dtype, requires_grad)

    def new_zeros(self, size, dtype=None, requires_grad=False):
        return self._new("samba_tensor_new_zeros", size, None, dtype, requires_grad)

    def new_ones(self, size, dtype=None, requires_grad=False):
        return self._new("samba_tensor_new_ones", size, None, dtype, requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        return self._new("samba_tensor_new_full", size, float(fill_value), dtype, requires_grad)

    # ---- indexing --------------------------------------------------------------------
    def __getitem__(self, key):
        with build_index(key, self._coerce) as idx:
            return self._unary("samba_tensor_index", idx.handle)

    def __setitem__(self, key, value):
        with build_index(key, self._coerce) as idx:
            if isinstance(value, (int, float, bool)):
                call("samba_tensor_index_put_scalar", self._h, idx.handle, ctypes.c_double(float(value)))
            else:
                call("samba_tensor_index_put", self._h, idx.handle, self._coerce(value)._h)

    # ---- reductions that return indices ------------------------------------------------
    def _extreme(self, op, result_type, dim=None, keepdim=False):
        """torch.max/min forms: the whole tensor's value, the elementwise extreme
        with another tensor, or (values, indices) along an int dim."""
        if dim is None:
            return self._call_op(op, [self])
        if not isinstance(dim, int) or isinstance(dim, bool):
            return self._op("maximum" if op == "max" else "minimum", dim)
        indices = self._call_op("arg" + op, [self], {"dim": dim, "keepdim": True})
        # Values are gathered at the indices, so they agree with them on ties and
        # NaN, and the gradient flows to the chosen element only, as in torch.
        values = self._call_op("gather", [self, indices], {"dim": dim})
        if not keepdim:
            values = self._call_op("squeeze", [values], {"dim": [dim]})
            indices = self._call_op("squeeze", [indices], {"dim": [dim]})
        return result_type(values, indices)

    def max(self, dim=None, keepdim=False):
        """x.max(): the largest value; x.max(dim, keepdim) -> (values, indices); x.max(other): elementwise."""
        return self._extreme("max", MaxResult, dim, keepdim)

    def min(self, dim=None, keepdim=False):
        """x.min(): the smallest value; x.min(dim, keepdim) -> (values, indices); x.min(other): elementwise."""
        return self._extreme("min", MinResult, dim, keepdim)

    # ---- ordering: (values, int64 indices) as torch.return_types ----------------------
    def sort(self, dim=-1, descending=False, stable=False):
        """torch.sort: (values, indices) along dim; stable whatever `stable` says."""
        return SortResult(*self._call_op("sort", [self], {"dim": dim, "descending": bool(descending)}))

    def argsort(self, dim=-1, descending=False, stable=False):
        return self.sort(dim, descending).indices

    def msort(self):
        return self.sort(0).values

    def topk(self, k, dim=-1, largest=True, sorted=True):  # noqa: A002 - torch's name
        """torch.topk: the k largest (smallest) (values, indices) along dim, always sorted."""
        return TopkResult(*self._call_op("topk", [self], {"k": int(k), "dim": dim, "largest": bool(largest)}))

    def kthvalue(self, k, dim=-1, keepdim=False):
        """torch.kthvalue: the k-th smallest (values, indices) along dim (k counts from 1)."""
        return KthvalueResult(*self._call_op("kthvalue", [self], {"k": int(k), "dim": dim, "keepdim": bool(keepdim)}))

    def median(self, dim=None, keepdim=False):
        """torch.median: the lower median, or NaN (and the first NaN's index) where
        the line has one; (values, indices) along an int dim."""
        x, d = (self.reshape(-1), 0) if dim is None else (self, dim)
        values, indices = x.kthvalue((x.shape[d] + 1) // 2, d, keepdim=True)
        if dtypes.from_name(x.dtype).is_floating_point:
            nan = self._call_op("ne", [x, x])
            first = self._call_op("argmax", [nan.int()], {"dim": d, "keepdim": True})
            has_nan = nan.gather(d, first)
            values = self._call_op("where", [has_nan, x.gather(d, first), values])
            indices = self._call_op("where", [has_nan, first, indices])
        if dim is None:
            return values.reshape(())
        if not keepdim:
            values, indices = values.squeeze(d), indices.squeeze(d)
        return MedianResult(values, indices)

    # ---- torch's (dim, index, ...) argument order ----------------------------------------
    def gather(self, dim, index, sparse_grad=False):
        return self._call_op("gather", [self, self._coerce(index)], {"dim": dim})

    def index_select(self, dim, index):
        return self._call_op("index_select", [self, self._coerce(index)], {"dim": dim})

    def _scatter(self, op, dim, index, src, value):
        index = self._coerce(index)
        if src is None:
            src = self.new_full(index.shape, value)
        elif isinstance(src, (int, float, bool)):
            src = self.new_full(index.shape, src)
        return self._call_op(op, [self, index, self._coerce(src)], {"dim": dim})

    def scatter(self, dim, index, src=None, value=None, reduce=None):
        """torch.scatter: src (a tensor, or a number as `src` or `value`) written at index along dim."""
        if reduce is not None:
            raise SambaError("SAMBA_ERR_UNSUPPORTED",
                             f"SambaTensor.scatter: reduce={reduce!r} is not supported; use scatter_add for 'add'")
        return self._scatter("scatter", dim, index, src, value)

    def scatter_add(self, dim, index, src):
        return self._scatter("scatter_add", dim, index, src, None)

    # ---- sizes as torch takes them ---------------------------------------------------
    def expand(self, *sizes):
        """x.expand(b, s), x.expand((b, s)): a broadcast view; -1 keeps a size, new dims lead."""
        return self._call_op("expand", [self], {"shape": list(_dims(sizes))})

    def expand_as(self, other):
        return self.expand(other.shape)

    def repeat(self, *sizes):
        """x.repeat(2, 1), x.repeat((2, 1)): x tiled along each dim."""
        return self._call_op("repeat", [self], {"repeats": list(_dims(sizes))})

    def bmm(self, mat2):
        return self._call_op("bmm", [self, self._coerce(mat2)])

    def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
        """beta * self + alpha * (batch1 @ batch2), as torch.baddbmm."""
        return self._call_op("baddbmm", [self, self._coerce(batch1), self._coerce(batch2)],
                             {"beta": float(beta), "alpha": float(alpha)})

    # ---- operators -------------------------------------------------------------------
    def _op(self, name, other=None, reverse=False):
        if other is None:
            return self._call_op(name, [self])
        other = self._coerce(other)
        return self._call_op(name, [other, self] if reverse else [self, other])

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
    def __pos__(self): return self
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

    def split(self, split_size_or_sections, dim=0):
        """torch.split: a tuple of views, chunks of split_size (the last may be smaller) or of the listed sizes."""
        if isinstance(split_size_or_sections, int):
            attrs = {"split_size": split_size_or_sections, "dim": dim}
        else:
            attrs = {"sections": [int(s) for s in split_size_or_sections], "dim": dim}
        out = self._call_op("split", [self], attrs)
        return out if isinstance(out, tuple) else (out,)

    def __getattr__(self, name):
        # Registry ops as methods: x.relu(), x.sum(dim=[1]), x.softmax(dim=1).
        if name in UNSUPPORTED_VALUE_INDEX_FUNCTIONS:
            raise SambaError("SAMBA_ERR_UNSUPPORTED",
                             f"SambaTensor.{name}: Samba has no op computing {name}'s (values, indices); "
                             f"sort, topk, kthvalue, median and max/min along a dim are supported")
        if not is_op(name):
            raise AttributeError(f"SambaTensor has no attribute or op '{name}'")
        return lambda *args, **kwargs: self._call_bound(name, (self,) + args, kwargs)
