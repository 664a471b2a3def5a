"""samba.onnx: an ONNX backend (onnx.backend.base.Backend: prepare, run_model,
run_node, supports_device) over the engine's importer, so code written for
ONNX backends, such as onnx's backend tests, runs models on Samba.

The `onnx` package is needed only here, and is imported on first use:
SambaBackend and SambaBackendRep are built then (module __getattr__), and
numpy with it, so importing the package needs neither."""
from .onnx_import import OnnxModel, max_opset
from .tensor import from_numpy

_built = {}


def _build():
    import numpy as np  # the backend API speaks numpy arrays
    import onnx  # optional: only the backend API needs it (its base classes and model builders)
    import onnx.backend.base as base  # optional: the Backend and BackendRep base classes

    class SambaBackendRep(base.BackendRep):
        """A prepared model: imported once, run eagerly on host tensors."""

        def __init__(self, model):
            super().__init__()
            ## The imported model (an OnnxModel).
            self.model = OnnxModel(model.SerializeToString())
            ## The graph's input names, in order: the keys a dict of inputs may use.
            self.input_names = [name for name, _, _ in self.model.inputs]

        def run(self, inputs, **kwargs):
            if isinstance(inputs, dict):
                inputs = [inputs[name] for name in self.input_names]
            elif not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            # np.require, not np.ascontiguousarray: that makes a 0-d array 1-d.
            tensors = [from_numpy(np.require(a, requirements='C')) for a in inputs]
            outs = self.model(*tensors)
            outs = outs if isinstance(outs, tuple) else (outs,)
            return base.namedtupledict("Outputs", [n for n, _, _ in self.model.outputs])(*[o.numpy() for o in outs])

    class SambaBackend(base.Backend):
        """Runs ONNX models and single nodes on Samba's CPU emulator."""

        @classmethod
        def prepare(cls, model, device="CPU", **kwargs):
            super().prepare(model, device, **kwargs)
            return SambaBackendRep(model)

        @classmethod
        def run_model(cls, model, inputs, device="CPU", **kwargs):
            return cls.prepare(model, device, **kwargs).run(inputs)

        @classmethod
        def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
            """Runs one node on `inputs` (numpy arrays, in the node's input order),
            as a one-node model at the newest opset the importer accepts."""
            helper = onnx.helper
            arrays = [np.asarray(a) for a in inputs]
            # onnx 1.13 added np_dtype_to_tensor_dtype; 1.12 (Debian's) has the mapping table.
            to_onnx = getattr(helper, "np_dtype_to_tensor_dtype", None) or (
                lambda dt: onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(dt)])
            graph_inputs = [helper.make_tensor_value_info(name, to_onnx(a.dtype), a.shape)
                            for name, a in zip(node.input, arrays) if name]
            opset = min(max_opset(), onnx.defs.onnx_opset_version())
            graph = helper.make_graph([node], "node", graph_inputs,
                                      [helper.make_empty_tensor_value_info(name) for name in node.output if name])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
            # Output types come from ONNX's own inference, as a backend's caller would give them.
            inferred = onnx.shape_inference.infer_shapes(model)
            known = {v.name: v for v in inferred.graph.value_info}
            for out in model.graph.output:
                if out.name in known:
                    out.CopyFrom(known[out.name])
            return cls.prepare(model, device, **kwargs).run([a for name, a in zip(node.input, arrays) if name])

        @classmethod
        def supports_device(cls, device):
            return str(device).upper() == "CPU"

    return {"SambaBackend": SambaBackend, "SambaBackendRep": SambaBackendRep}


def __getattr__(name):
    if name in ("SambaBackend", "SambaBackendRep", "prepare", "run_model", "run_node", "supports_device"):
        if not _built:
            _built.update(_build())
        backend = _built["SambaBackend"]
        return _built.get(name) or getattr(backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
