"""Samba for Python: the SambaFlow programming model over libsamba's C ABI.

    import sambaflow.samba as samba
    x = samba.randn(8, 784, name="x")
    w = samba.parameter("fc.weight", (10, 784))           # kaiming-uniform, like nn.Linear
    loss = samba.cross_entropy(samba.linear(x, w), y)     # computes now, or traces in compile

Ops come from the engine's registry (samba.op_names()); SambaSession and the
default `samba.session` compile models into PEF files and run them."""
from ._lib import SambaError, lib as _lib
from . import dtypes
from .dtypes import DType as dtype, bfloat16, bool_, float16, float32, float64, int8, int16, int32, int64, uint8
from .dtypes import promote_types
from .creation import arange, empty, full, normal, ones, parameter, rand, randint, randn, zeros
from .functions import call_op, export_all as _export_all
from .lazy import Materializer, RngStream
from .ops import op_names, schema
from .session import SambaSession, session
from .tensor import SambaTensor, as_tensor, from_dlpack, from_numpy
from .torch_interop import from_torch_model_, from_torch_tensor, to_torch
from .graph import SambaGraph
from .sambaloader import SambaLoader
from . import functional, optim
from .functional import einsum
from . import utils
from . import onnx  # the ONNX backend; the onnx package is imported on first use

__version__ = _lib.samba_version().decode()

## torch's spelling of the boolean dtype: samba.bool is samba.bool_.
bool = bool_  # noqa: A001 - torch's spelling, samba.bool
## torch's alias of float32: samba.float.
float = float32  # noqa: A001
## torch's alias of int64: samba.long.
long = int64


def isa_name():
    """The vector ISA level the kernels run at: "generic", "avx2", "avx512" or "avx512_bf16".

    The best level the CPU has among those the library was built with, unless
    SAMBA_ISA in the environment names a lower one (samba_isa_name in C)."""
    return _lib.samba_isa_name().decode()


def set_seed(seed):
    """The default session's seed (random tensors, lazy parameters without a seed of their own)."""
    session.set_seed(seed)
    session.reset_random_generator()


def from_torch_model(model):
    """from_torch_model_ (the conversion is in place either way)."""
    return from_torch_model_(model)


def ops():
    """The names of the registry's ops (each is a samba.<name> function)."""
    return op_names()


def op_schema(name):
    """The registry's schema of op `name` (inputs, attributes with types and defaults, docs)."""
    return schema(name)


_export_all(globals())
