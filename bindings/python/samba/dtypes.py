"""Samba's dtypes, with names as torch spells them."""
import ctypes

from ._lib import lib, call

float32, bfloat16, float16, float64, int64, int32, int16, int8, uint8, bool_ = range(10)
_by_name = {}


def from_name(name):
    if isinstance(name, int):
        return name
    if name in _by_name:
        return _by_name[name]
    out = ctypes.c_int32()
    call("samba_dtype_from_name", str(name).replace("torch.", "").encode(), ctypes.byref(out))
    _by_name[name] = out.value
    return out.value


def name(code):
    return lib.samba_dtype_name(code).decode()


def size(code):
    return lib.samba_dtype_size(code)


# numpy typestr per dtype (bfloat16 has none in numpy: exposed as raw uint16).
NUMPY = {float32: "<f4", float16: "<f2", float64: "<f8", int64: "<i8", int32: "<i4", int16: "<i2",
         int8: "|i1", uint8: "|u1", bool_: "|b1", bfloat16: "<u2"}
FROM_NUMPY = {"float32": float32, "float16": float16, "float64": float64, "int64": int64, "int32": int32,
              "int16": int16, "int8": int8, "uint8": uint8, "bool": bool_}
