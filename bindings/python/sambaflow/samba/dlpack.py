"""DLPack in and out through PyCapsules (samba_tensor_from_dlpack / _to_dlpack),
on native handles; SambaTensor wraps them (tensor.from_dlpack, __dlpack__)."""
import ctypes

from ._lib import call, out_handle

_api = ctypes.pythonapi
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


# DLTensor's dtype field (after data, device and ndim) and DLPack 0.8's kDLBool.
_DTYPE_OFFSET = 20
_DL_BOOL = 6


def handle_from_dlpack(obj, as_bool=False):
    """An OWNED tensor handle taking over a DLPack producer's (or capsule's) tensor.
    as_bool relabels 8-bit elements as kDLBool: torch 1.13 exports no bools, so its
    bool tensors come as uint8 views."""
    capsule = obj.__dlpack__() if hasattr(obj, "__dlpack__") else obj
    ptr = _api.PyCapsule_GetPointer(capsule, b"dltensor")
    if as_bool:
        ctypes.c_uint8.from_address(ptr + _DTYPE_OFFSET).value = _DL_BOOL
    h = out_handle("samba_tensor_from_dlpack", ctypes.c_void_p(ptr))
    # The tensor owns the DLManagedTensor now: the capsule must not delete it.
    _api.PyCapsule_SetName(capsule, b"used_dltensor")
    return h


def to_dlpack(t):
    """A DLPack capsule sharing the memory of `t` (anything with a tensor .handle)."""
    managed = ctypes.c_void_p()
    call("samba_tensor_to_dlpack", t.handle, ctypes.byref(managed))
    return _api.PyCapsule_New(managed, b"dltensor", None)
