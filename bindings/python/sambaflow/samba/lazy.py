"""Materializers: what gives a (lazily created) parameter its initial values."""
import ctypes

from ._lib import NativeHandle, P, call, lib, out_handle
from .ops import attrs_handle

## The C signature of a custom materializer: status fn(user_data, out_tensor, rng_stream).
MATERIALIZE_FN = ctypes.CFUNCTYPE(ctypes.c_int32, P, P, P)


class RngStream:
    """The stream a custom materializer draws from (the seed's MultithreadedRNG)."""

    def __init__(self, handle):
        self._h = ctypes.c_void_p(handle)

    def uniform(self, out, low=0.0, high=1.0):
        """Fills tensor `out` with values drawn uniformly from [low, high)."""
        call("samba_rng_stream_uniform", self._h, out.handle, ctypes.c_double(low), ctypes.c_double(high))

    def normal(self, out, mean=0.0, std=1.0):
        """Fills tensor `out` with normally distributed values (mean, std)."""
        call("samba_rng_stream_normal", self._h, out.handle, ctypes.c_double(mean), ctypes.c_double(std))

    def integers(self, out, low, high):
        """Fills tensor `out` with integers drawn uniformly from [low, high)."""
        call("samba_rng_stream_integers", self._h, out.handle, ctypes.c_int64(low), ctypes.c_int64(high))


class Materializer(NativeHandle, release="samba_materializer_release"):
    """A built-in (samba.Materializer("kaiming_uniform", a=0.0)) or custom materializer."""

    def __init__(self, kind_or_handle, **params):
        if isinstance(kind_or_handle, str):
            ah = attrs_handle(params) if params else None
            try:
                super().__init__(out_handle("samba_materializer_create", kind_or_handle.encode(), ah))
            finally:
                if ah:
                    lib.samba_attrs_release(ah)
        else:
            super().__init__(kind_or_handle)
        self._callback = None

    @classmethod
    def custom(cls, fn, borrowed_tensor):
        """fn(tensor, rng) fills `tensor` in place (through rng, numpy, or ops);
        borrowed_tensor(handle) makes the tensor fn gets (SambaTensor._borrowed)."""

        def trampoline(_user, out, rng):
            try:
                fn(borrowed_tensor(out), RngStream(rng))
                return 0
            except BaseException as e:  # noqa: BLE001 - reported through the status
                lib.samba_set_error_message(1, f"{type(e).__name__}: {e}".encode())
                return 1

        cb = MATERIALIZE_FN(trampoline)
        m = cls(out_handle("samba_materializer_create_custom", cb, None, None))
        m._callback = cb
        return m

    @property
    def kind(self):
        """The materializer's kind, e.g. "kaiming_uniform" or "custom"."""
        out = ctypes.c_char_p()
        call("samba_materializer_kind", self._h, ctypes.byref(out))
        return out.value.decode()
