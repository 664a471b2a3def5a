"""Samba's dtypes. A dtype is an int (the C ABI's code) that also compares
equal to its names ("float32", "float") and to the torch dtype of the same
name, so that `t.dtype == torch.float32` holds as it does in SambaFlow.
SambaTensor.dtype itself is the torch dtype when torch imports (models pass
it to torch.finfo and torch.full); from_name and to_torch convert both ways."""
import ctypes

from ._lib import lib, call


class DType(int):
    """A dtype code with a name; `samba.float32`, `samba.int64`, ..."""

    def __new__(cls, code, name):
        obj = super().__new__(cls, code)
        obj.name = name
        return obj

    def __repr__(self):
        return f"samba.{self.name}"

    __str__ = __repr__

    def __eq__(self, other):
        if isinstance(other, int):
            return int(self) == int(other)
        if other is None:
            return False
        try:
            return int(self) == from_name(other)
        except Exception:  # noqa: BLE001 - not a dtype: unequal
            return False

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = int.__hash__

    @property
    def is_floating_point(self):
        """Whether values of this dtype are floating point (float32, bfloat16, float16, float64)."""
        return int(self) in (0, 1, 2, 3)

    @property
    def itemsize(self):
        """Bytes per element, as torch.dtype.itemsize."""
        return size(self)

    def to_torch(self):
        """The torch.dtype of the same name (imports torch; raises ImportError without it)."""
        import torch  # optional: only torch interop needs it, so it is imported on first use
        return getattr(torch, self.name)


_torch_state = {}


def public(code):
    """The dtype a SambaTensor shows: the torch dtype when torch imports, else the Samba DType."""
    if "torch" not in _torch_state:
        try:
            import torch  # optional: without it SambaTensor.dtype stays a Samba DType
            _torch_state["torch"] = torch
        except ImportError:
            _torch_state["torch"] = None
    torch = _torch_state["torch"]
    dt = ALL[int(code)]
    return dt if torch is None else getattr(torch, dt.name)


def to_torch(dtype):
    """The torch dtype for a Samba DType, code, name or torch dtype."""
    return from_name(dtype).to_torch()


_NAMES = ("float32", "bfloat16", "float16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool")
## Every dtype, in the order of the C enum's codes.
ALL = tuple(DType(i, n) for i, n in enumerate(_NAMES))
## 32-bit IEEE float (torch.float32).
float32 = ALL[0]
## bfloat16: float32's exponent with a 7-bit mantissa (torch.bfloat16).
bfloat16 = ALL[1]
## 16-bit IEEE half float (torch.float16).
float16 = ALL[2]
## 64-bit IEEE float (torch.float64).
float64 = ALL[3]
## 64-bit signed integer (torch.int64).
int64 = ALL[4]
## 32-bit signed integer (torch.int32).
int32 = ALL[5]
## 16-bit signed integer (torch.int16).
int16 = ALL[6]
## 8-bit signed integer (torch.int8).
int8 = ALL[7]
## 8-bit unsigned integer (torch.uint8).
uint8 = ALL[8]
## Boolean (torch.bool); named bool_ here because bool is Python's.
bool_ = ALL[9]
_by_name = {}


def from_name(name):
    """The dtype for a DType, code, name ("float", "bf16", "long") or torch / numpy dtype."""
    if isinstance(name, int) and not isinstance(name, bool):
        if not 0 <= int(name) < len(ALL):
            raise ValueError(f"{name} is not a dtype code; expected 0..{len(ALL) - 1}")
        return ALL[int(name)]
    key = name if isinstance(name, str) else str(name)
    if key in _by_name:
        return _by_name[key]
    text = key.replace("torch.", "").replace("samba.", "")
    if hasattr(name, "name") and hasattr(name, "itemsize"):  # numpy dtype or type
        text = getattr(name, "name")
    elif isinstance(name, type):
        text = name.__name__
    out = ctypes.c_int32()
    call("samba_dtype_from_name", text.encode(), ctypes.byref(out))
    _by_name[key] = ALL[out.value]
    return ALL[out.value]


def name(code):
    """The C library's name of dtype `code` (a DType or its integer code), e.g. "float32"."""
    return lib.samba_dtype_name(int(code)).decode()


def size(code):
    """Bytes per element of dtype `code` (a DType or its integer code)."""
    return lib.samba_dtype_size(int(code))


def promote_types(a, b):
    """torch.promote_types for Samba dtypes."""
    out = ctypes.c_int32()
    call("samba_promote_types", ctypes.c_int32(from_name(a)), ctypes.c_int32(from_name(b)), ctypes.byref(out))
    return ALL[out.value]


# numpy typestr per dtype (bfloat16 has none in numpy: exposed as raw uint16).
## numpy's array-interface type string of each dtype (bfloat16 travels as raw uint16).
NUMPY = {float32: "<f4", float16: "<f2", float64: "<f8", int64: "<i8", int32: "<i4", int16: "<i2",
         int8: "|i1", uint8: "|u1", bool_: "|b1", bfloat16: "<u2"}
## The dtype of each numpy dtype name that has one.
FROM_NUMPY = {"float32": float32, "float16": float16, "float64": float64, "int64": int64, "int32": int32,
              "int16": int16, "int8": int8, "uint8": uint8, "bool": bool_}
