"""Finding libsamba.so and calling it: prototypes, status checks, errors."""
import ctypes
import ctypes.util
import os

_here = os.path.dirname(os.path.abspath(__file__))


class SambaError(RuntimeError):
    """A failed call: `status` is the SAMBA_ERR_* name, the message is the library's."""

    def __init__(self, status, message):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def _candidates():
    """Next to the package, then $SAMBA_LIBRARY, then the system library path."""
    for name in ("libsamba.so", "libsamba.so.0"):
        yield os.path.join(_here, name)
    env = os.environ.get("SAMBA_LIBRARY")
    if env:
        yield env
    found = ctypes.util.find_library("samba")
    if found:
        yield found
    yield "libsamba.so.0"


def _load():
    tried = []
    for path in _candidates():
        if os.path.isabs(path) and not os.path.exists(path):
            tried.append(f"{path} (no such file)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("libsamba.so was not found; looked in: " + "; ".join(tried) +
                      ". Set SAMBA_LIBRARY to the library's path (for a build tree: build/libsamba.so).")


lib, path = _load()

c_int32, c_int64, c_uint64, c_size, c_double = (ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64,
                                                 ctypes.c_size_t, ctypes.c_double)
P = ctypes.c_void_p
PP = ctypes.POINTER(ctypes.c_void_p)
c_str = ctypes.c_char_p

lib.samba_last_error_message.restype = c_str
lib.samba_status_name.restype = c_str
lib.samba_status_name.argtypes = [c_int32]
lib.samba_version.restype = c_str
lib.samba_op_count.restype = c_size
lib.samba_dtype_name.restype = c_str
lib.samba_dtype_name.argtypes = [c_int32]
lib.samba_dtype_size.restype = c_size
lib.samba_dtype_size.argtypes = [c_int32]
for _fn in ("samba_tensor_release", "samba_session_release", "samba_attrs_release", "samba_optimizer_release",
            "samba_compile_options_release", "samba_run_options_release", "samba_trace_options_release",
            "samba_session_options_release", "samba_lazy_param_options_release", "samba_materializer_release",
            "samba_index_release", "samba_graph_release"):
    _f = getattr(lib, _fn, None)  # optional ones may be missing from an older library
    if _f is not None:
        _f.argtypes = [P]
        _f.restype = None


def check(status):
    if status != 0:
        name = lib.samba_status_name(status).decode()
        raise SambaError(name, lib.samba_last_error_message().decode())


def function(name):
    """The library's function `name`, looked up when first called, so that a
    library without it fails only there, with SambaError naming it."""
    try:
        return getattr(lib, name)
    except AttributeError:
        raise SambaError("SAMBA_ERR_UNSUPPORTED", f"{name} is not available in this library ({path}); "
                         f"it needs a newer libsamba") from None


def call(name, *args):
    """Calls a samba_* function returning a status; raises SambaError on failure."""
    check(function(name)(*args))


def out_handle(name, *args):
    """Calls a function whose last argument is an out-pointer to a handle."""
    h = P()
    call(name, *args, ctypes.byref(h))
    return h


def strings(values):
    arr = (c_str * len(values))(*[v.encode() for v in values])
    return arr


def handles(values):
    return (P * max(1, len(values)))(*[v for v in values])


MODEL_FN = ctypes.CFUNCTYPE(c_int32, P, PP, c_size, PP, c_size, ctypes.POINTER(c_size))
