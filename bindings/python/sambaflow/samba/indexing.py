"""Python index expressions (ints, slices, None, Ellipsis, lists, tensors) as a samba_index."""
import ctypes

from ._lib import NativeHandle, call, out_handle

_NO_START, _NO_STOP = 1, 2


class Index(NativeHandle, release="samba_index_release"):
    __slots__ = ()


def build_index(key, as_tensor):
    """An Index for `key`; items that are not ints, slices, None, Ellipsis or
    lists become tensors through `as_tensor` (the caller's conversion)."""
    items = key if isinstance(key, tuple) else (key,)
    idx = Index(out_handle("samba_index_create"))
    try:
        for k in items:
            if k is None:
                call("samba_index_add_none", idx.handle)
            elif k is Ellipsis:
                call("samba_index_add_ellipsis", idx.handle)
            elif isinstance(k, bool):
                raise TypeError("a bool index is not supported; use a bool tensor")
            elif isinstance(k, int):
                call("samba_index_add_int", idx.handle, ctypes.c_int64(k))
            elif isinstance(k, slice):
                flags = (_NO_START if k.start is None else 0) | (_NO_STOP if k.stop is None else 0)
                call("samba_index_add_slice", idx.handle, ctypes.c_int64(k.start or 0), ctypes.c_int64(k.stop or 0),
                     ctypes.c_int64(1 if k.step is None else k.step), ctypes.c_uint32(flags))
            elif isinstance(k, (list, range)):
                vals = (ctypes.c_int64 * max(1, len(k)))(*k)
                call("samba_index_add_list", idx.handle, vals, ctypes.c_size_t(len(k)))
            else:
                call("samba_index_add_tensor", idx.handle, as_tensor(k).handle)
    except BaseException:
        idx.close()
        raise
    return idx
