"""Samba for Python: the SambaFlow programming model over libsamba's C ABI.

    import samba
    x = samba.randn(8, 784, name="x")
    w = samba.parameter("fc.weight", (10, 784))           # kaiming-uniform, like nn.Linear
    loss = samba.cross_entropy(samba.linear(x, w), y)     # computes now, or traces in compile

Ops come from the engine's registry (samba.op_names()); SambaSession and the
default `samba.session` compile models into PEF files and run them."""
from ._lib import SambaError, lib as _lib
from . import dtypes
from .creation import arange, empty, full, normal, ones, parameter, rand, randint, randn, zeros
from .lazy import Materializer, RngStream
from .ops import call_op, op_names, schema
from .session import SambaSession, session
from .tensor import SambaTensor, as_tensor, from_numpy
from . import optim, utils

__version__ = _lib.samba_version().decode()

float32, bfloat16, float16, float64 = "float32", "bfloat16", "float16", "float64"
int64, int32, int16, int8, uint8 = "int64", "int32", "int16", "int8", "uint8"


def set_seed(seed):
    """The default session's seed (random tensors, lazy parameters without a seed of their own)."""
    session.set_seed(seed)


def from_dlpack(obj):
    """A SambaTensor sharing the memory of any object with __dlpack__ (or a DLPack capsule)."""
    from .dlpack import from_dlpack as _from
    return _from(obj)


def _export_ops():
    from .ops import export_all
    export_all(globals())


_export_ops()
