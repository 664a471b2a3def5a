"""ONNX models in: an ONNX ModelProto, its serialized bytes or a file path,
imported by the engine (samba/onnx.h) into registry ops. The `onnx` package
is never needed here: a ModelProto is handed over as its serialized bytes."""
import ctypes
import json
import os

from ._lib import MODEL_FN, NativeHandle, P, c_size, call, lib, out_handle
from .tensor import SambaTensor, as_tensor, to_handles

_MAX_OUTPUTS = 256


def is_onnx_model(model):
    """Whether `model` is something OnnxModel imports (not a Python callable model)."""
    if isinstance(model, (OnnxModel, bytes, bytearray, str, os.PathLike)):
        return True  # a path is an ONNX file: a Python model is a callable
    # An onnx.ModelProto, recognized without importing onnx.
    return type(model).__name__ == "ModelProto" and hasattr(model, "SerializeToString")


class _NativeForward:
    """samba_onnx_model_forward as a model callback (no Python runs while tracing)."""

    ## The engine's forward function for ONNX models, as a ctypes callback.
    fn = MODEL_FN(("samba_onnx_model_forward", lib))

    def __init__(self, model):
        ## The OnnxModel, kept alive while the engine calls back.
        self.model = model
        ## The model handle the engine passes back to `fn`.
        self.user_data = model.handle
        ## Always None: the forward runs in the engine, so no Python error can arise.
        self.error = None


class OnnxModel(NativeHandle, release="samba_onnx_model_release"):
    """An imported ONNX model. Pass it to session.compile / utils.trace_graph
    like a module; its parameters() go to an optimizer to train it."""

    def __init__(self, model):
        if isinstance(model, OnnxModel):
            raise TypeError("OnnxModel: already imported")
        if isinstance(model, (str, os.PathLike)):
            h = out_handle("samba_onnx_model_load_file", os.fsencode(model))
        else:
            data = bytes(model) if isinstance(model, (bytes, bytearray)) else model.SerializeToString()
            h = out_handle("samba_onnx_model_load", data, ctypes.c_size_t(len(data)))
        super().__init__(h)
        self._initializers = None

    @staticmethod
    def of(model):
        """`model` as an OnnxModel (imported once when it is not one already)."""
        return model if isinstance(model, OnnxModel) else OnnxModel(model)

    def _callback(self):
        return _NativeForward(self)

    def _infos(self, kind):
        n = c_size()
        call(f"samba_onnx_model_{kind}_count", self.handle, ctypes.byref(n))
        infos = []
        for i in range(n.value):
            name, dtype = ctypes.c_char_p(), ctypes.c_int32()
            shape, ndim = ctypes.POINTER(ctypes.c_int64)(), c_size()
            call(f"samba_onnx_model_{kind}_info", self.handle, ctypes.c_size_t(i), ctypes.byref(name),
                 ctypes.byref(dtype), ctypes.byref(shape), ctypes.byref(ndim))
            infos.append((name.value.decode(), dtype.value, tuple(shape[d] for d in range(ndim.value))))
        return infos

    @property
    def inputs(self):
        """[(name, dtype code, shape)] of the graph inputs; -1 marks a symbolic dim."""
        return self._infos("input")

    @property
    def outputs(self):
        """[(name, dtype code, shape)] of the graph outputs."""
        return self._infos("output")

    @property
    def opset(self):
        """The model's default-domain opset version."""
        out = ctypes.c_int64()
        call("samba_onnx_model_opset", self.handle, ctypes.byref(out))
        return out.value

    def initializers(self):
        """{name: SambaTensor} of the initializers (the same tensors the model uses)."""
        if self._initializers is None:
            n = c_size()
            call("samba_onnx_model_initializer_count", self.handle, ctypes.byref(n))
            tensors = [SambaTensor._wrap(out_handle("samba_onnx_model_initializer", self.handle, ctypes.c_size_t(i)))
                       for i in range(n.value)]
            self._initializers = {t.sn_name: t for t in tensors}
        return self._initializers

    def parameters(self):
        """The trainable initializers (floating ones other than running statistics)."""
        return [t for t in self.initializers().values() if t.requires_grad]

    def __call__(self, *inputs):
        """Runs the graph eagerly on host tensors; one output, or a tuple of them."""
        tensors = [as_tensor(t) for t in inputs]
        outs = (P * _MAX_OUTPUTS)()
        n = c_size()
        call("samba_onnx_model_forward", self.handle, to_handles(tensors), ctypes.c_size_t(len(tensors)), outs,
             ctypes.c_size_t(_MAX_OUTPUTS), ctypes.byref(n))
        result = [SambaTensor._wrap(outs[i]) for i in range(n.value)]
        return result[0] if len(result) == 1 else tuple(result)


def max_opset():
    """The newest ONNX opset the library imports (0: built without the ONNX library)."""
    fn = lib.samba_onnx_max_opset
    fn.restype = ctypes.c_int64
    return fn()


def op_table():
    """The ONNX op table: [{"op", "since", "until", "registry_ops"}]."""
    out = ctypes.c_char_p()
    call("samba_onnx_op_table_json", ctypes.byref(out))
    return json.loads(out.value.decode())
