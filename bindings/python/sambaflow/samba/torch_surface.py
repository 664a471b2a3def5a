"""The parts of torch.Tensor's surface that models query besides ops:
flags (is_nested, is_sparse, ...), device and layout, .to() with devices,
in-place methods on any dtype, torch.no_grad, and torch
Tensor methods that torch's functions of the same name map (they go
through the same __torch_function__ dispatch as torch.<name>(x, ...), so a
method and its function never differ). TorchSurface is a base of SambaTensor; it needs the
op layer and torch_dispatch only."""
import functools
import sys

from ._lib import SambaError, call, lib
from .ops import is_op
from .torch_dispatch import dispatch, table_function, torch_module

# What a table-routed method takes from the op's method form (inspect.signature reads __signature__).
_OP_METHOD_ATTRS = ("__name__", "__qualname__", "__doc__", "__signature__")


def _grad_disabled():
    """torch.no_grad() is active (torch is never imported just to ask)."""
    torch = sys.modules.get("torch")
    return torch is not None and not torch.is_grad_enabled()


class TorchSurface:
    """The torch.Tensor attributes that make a SambaTensor pass where torch code expects a tensor:
    flags, layout, device queries, no_grad and torch functions Samba has no op for."""
    __slots__ = ()

    # Host tensors are dense, strided and on the host: what these flags say in torch.
    ## Always False: SambaTensors are not nested (torch's Tensor.is_nested).
    is_nested = False
    ## Always False: SambaTensors are dense (torch's Tensor.is_sparse).
    is_sparse = False
    ## Always False: SambaTensors are not quantized (torch's Tensor.is_quantized).
    is_quantized = False
    ## Always False: SambaTensors hold data (torch's Tensor.is_meta).
    is_meta = False
    ## Always False: SambaTensors are not on a GPU (torch's Tensor.is_cuda).
    is_cuda = False
    ## Always False: SambaTensors use no MKL-DNN layout (torch's Tensor.is_mkldnn).
    is_mkldnn = False

    @property
    def layout(self):
        """torch.strided: SambaTensors are dense and strided (torch's Tensor.layout)."""
        return torch_module().strided

    def get_device(self):
        """-1, torch's answer for a tensor on the host (torch's Tensor.get_device)."""
        return -1  # torch's answer for a host tensor

    @classmethod
    def _call_op(cls, name, inputs, attrs=None):
        out = super()._call_op(name, inputs, attrs)
        if not _grad_disabled():
            return out
        # Under torch.no_grad() no result carries history, as in torch.
        if isinstance(out, tuple):
            return tuple(t.detach() if t.requires_grad else t for t in out)
        return out.detach() if out.requires_grad else out

    def to(self, *args, **kwargs):
        """to(dtype), to(device), to(device, dtype), to(tensor), to(dtype=..., copy=...):
        the host is the only device, so only a dtype changes anything."""
        target = kwargs.get("dtype")
        for a in args:
            if hasattr(a, "samba_dtype") or (hasattr(a, "dtype") and type(a).__name__ == "Tensor"):
                target = a.dtype
            elif not (isinstance(a, str) or type(a).__name__ == "device" or a is None or isinstance(a, bool)):
                target = a
        if kwargs.get("copy"):
            return super().to(target).clone() if target is not None else self.clone()
        return super().to(target) if target is not None else self

    def cuda(self, *args, **kwargs):
        """Always raises TypeError: there is no GPU; only .to(dtype) converts."""
        raise TypeError("SambaTensor.cuda(): Samba tensors live on the host or the device; use .to(dtype) only")

    def __contains__(self, element):
        """torch's `value in t`: whether any element equals it (not Python's row iteration)."""
        return bool((self == element).long().sum().item())

    def unbind(self, dim=0):
        """The slices along dimension `dim`, as a tuple (torch's Tensor.unbind)."""
        return tuple(self.select(dim, i) for i in range(self.shape[dim]))

    def square(self):
        """Each element squared (torch's Tensor.square)."""
        return self * self

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        inplace = name.endswith("_") and not name.endswith("__")
        if inplace and (is_op(name) or is_op(name[:-1])):
            return lambda *args, **kwargs: self._in_place(name, args, kwargs)
        torch = sys.modules.get("torch")
        mapped = table_function(name) if torch is not None else None
        if mapped is not None:  # torch's spelling of the arguments (p='fro'), as torch.<name>(x, ...)
            method = lambda *args, **kwargs: dispatch(type(self), mapped, (self,) + args, kwargs)  # noqa: E731
            if is_op(name):  # the op's own signature and doc, as without torch
                functools.update_wrapper(method, super().__getattr__(name), assigned=_OP_METHOD_ATTRS, updated=())
            return method
        if is_op(name):
            return super().__getattr__(name)
        if torch is not None and callable(getattr(torch.Tensor, name, None)):
            func = getattr(torch, name, None) if callable(getattr(torch, name, None)) else getattr(torch.Tensor, name)
            return lambda *args, **kwargs: dispatch(type(self), func, (self,) + args, kwargs)
        return super().__getattr__(name)

    def _in_place(self, name, args, kwargs):
        """x.<op>_(...): the registry's in-place op, else the op out of place copied back
        (x.mul_(3) on an int32 tensor); returns x, as torch does (registry in-place ops
        have no outputs). On a tensor with autograd history x takes the result instead."""
        if is_op(name) and not self._has_history(name):
            self._call_bound(name, (self,) + args, kwargs)
            return self
        return self.write_result(getattr(self, name[:-1])(*args, **kwargs), name)

    def _has_history(self, what):
        """Whether ops on this tensor are recorded: a value a trace computes (it has
        no data), or a tensor autograd records; a parameter refuses in-place changes
        then, as torch's leaves do."""
        if not self.has_data():
            return True
        if _grad_disabled() or not self.requires_grad:
            return False
        if self.is_parameter:
            raise SambaError("SAMBA_ERR_INVALID_STATE",
                             f"{what}: '{self.sn_name}' is a parameter that requires grad; change it in place "
                             f"only under torch.no_grad(), as torch requires")
        return True

    def write_result(self, result, what="in-place op"):
        """self becomes `result`, the value of an in-place op computed out of place.
        Without history the value is copied into self's memory (views see it; state
        such as num_batches_tracked is updated); with history self takes the result's
        tensor, so gradients flow through the op (writing into memory the graph has
        recorded would lose it)."""
        result = self._coerce(result)
        if not self._has_history(what):
            self._call_op("copy_", [self, result])
            return self
        call("samba_tensor_retain", result._h)
        old, self._h = self._h, result._h
        lib.samba_tensor_release(old)
        return self
