"""The package's leaf: finding libsamba.so and calling it (prototypes, status
checks, errors), NativeHandle (the one owner of a native handle), and the
default native session. It imports nothing of the package; every other
module builds on it."""
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
    """Inside the package first (a wheel or make install puts libsamba.so.0
    there), then $SAMBA_LIBRARY, then the system library path."""
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
lib.samba_isa_name.restype = c_str
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
    # Filled element by element: faster than the array constructor, which
    # converts its arguments through the generic path (this is on every run).
    arr = (P * max(1, len(values)))()
    for i, v in enumerate(values):
        arr[i] = v
    return arr


MODEL_FN = ctypes.CFUNCTYPE(c_int32, P, PP, c_size, PP, c_size, ctypes.POINTER(c_size))


class NativeHandle:
    """Owns one reference to a native object and releases it once: on close(),
    on leaving a `with` block, or when collected. A subclass names its
    release function: class SambaGraph(NativeHandle, release="samba_graph_release")."""

    __slots__ = ("_h",)
    _release = None

    def __init_subclass__(cls, release=None, **kwargs):
        super().__init_subclass__(**kwargs)
        if release is not None:
            # Bound now, on the class: at interpreter exit this module's
            # globals may already be gone while objects are still collected.
            cls._release = function(release)

    def __init__(self, handle=None):
        self._h = handle if handle is None or isinstance(handle, P) else P(handle)

    @property
    def handle(self):
        """The native handle (None once closed), for calls into the C API."""
        return self._h

    @property
    def _as_parameter_(self):
        # ctypes passes the object itself as its handle.
        return self._h

    def close(self):
        """Releases the native object now (once; later calls do nothing)."""
        h, self._h = getattr(self, "_h", None), None
        if h:
            self._release(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: the process frees it
            pass


class NativeSession(NativeHandle, release="samba_session_release"):
    """A native session: a thread pool, a seed, profiles, the loaded PEF."""

    __slots__ = ()


class Owned(NativeHandle):
    """A short-lived options object (samba_<kind>_options), released on leaving `with`."""

    __slots__ = ("_release",)

    def __init__(self, kind, *args):
        self._release = function(f"samba_{kind}_release")
        super().__init__(out_handle(f"samba_{kind}_create", *args))


# The default session (samba.session wraps it): eager ops, random tensors,
# lazy parameters and device tensor access go through it.
default_session = NativeSession(out_handle("samba_session_create", None))
