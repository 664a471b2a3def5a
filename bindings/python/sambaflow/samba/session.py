"""SambaSession: compile a model into a PEF, load it, and run it section by
section on the emulated device. `samba.session` is the default session."""
import contextlib
import ctypes
import os
import sys
import threading

from ._lib import (MODEL_FN, NativeSession, Owned, P, SambaError, c_size, call, check, default_session, lib, out_handle,
                   strings)
from . import distributed
from .session_dist import DataParallelSession, set_run_options_data_parallel
from .onnx_import import OnnxModel, is_onnx_model
from .tensor import SambaTensor, as_tensor, to_handles

_TRANSFER = {"parameters": 1, "buffers": 2, "optimizer_state": 4}
_NAMES = {"section_types": 0, "weights": 1, "argins": 2, "dropout_rate": 3, "dropout_seed": 4, "outputs": 5,
          "inputs": 6}
_MAX_OUTPUTS = 256
_MAX_CACHED_RUN_OPTIONS = 64


class _PerfReport(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("section_id", ctypes.c_int32), ("iterations", ctypes.c_int64),
                ("batch_size", ctypes.c_int64), ("samples_per_second", ctypes.c_double),
                ("latency_mean_ms", ctypes.c_double), ("latency_p50_ms", ctypes.c_double),
                ("latency_p99_ms", ctypes.c_double), ("latency_max_ms", ctypes.c_double)]


@contextlib.contextmanager
def _torch_sees_tracing():
    """torch.jit.is_tracing() is True while Samba traces a model: code that skips
    data-dependent Python checks under torch's own tracer (Hugging Face's padding
    warning reads token values) skips them here too, where values do not exist yet."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    saved = torch.jit.is_tracing
    torch.jit.is_tracing = lambda: True
    try:
        yield
    finally:
        torch.jit.is_tracing = saved


class _ModelCallback:
    """A Python model as the C ABI's samba_model_fn: errors become statuses
    whose message carries the Python exception."""

    def __init__(self, model, keys=None):
        self.model = model
        self.keys = keys  # inputs given as a dict: the model takes them as keyword arguments
        self.error = None
        self.fn = MODEL_FN(self._call)
        self.user_data = None

    def _call(self, _user, inputs, n_in, outputs, capacity, n_out):
        try:
            ins = [SambaTensor._borrowed(inputs[i]) for i in range(n_in)]
            with _torch_sees_tracing():
                result = self.model(**dict(zip(self.keys, ins))) if self.keys else self.model(*ins)
            outs = list(result) if isinstance(result, (tuple, list)) else [result]
            if len(outs) > capacity:
                raise ValueError(f"the model returned {len(outs)} outputs; at most {capacity} are supported")
            for i, t in enumerate(outs):
                t = as_tensor(t)
                call("samba_tensor_retain", t.handle)
                outputs[i] = t.handle.value
            n_out[0] = len(outs)
            return 0
        except BaseException as e:  # noqa: BLE001 - reported through the status
            self.error = e
            lib.samba_set_error_message(1, f"{type(e).__name__}: {e}".encode())
            return 1


def _model_callback(model, keys):
    """The callback compile and trace_graph hand the engine: an ONNX model (a
    ModelProto, its bytes, or an OnnxModel) runs as the engine's own
    samba_onnx_model_forward; anything else is called as Python."""
    if is_onnx_model(model):
        return OnnxModel.of(model)._callback()
    return _ModelCallback(model, keys)


def _inputs(inputs):
    """(tensors, keyword names or None) for a tuple, list or dict of inputs."""
    if isinstance(inputs, dict):
        return [as_tensor(v) for v in inputs.values()], list(inputs)
    if not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    return [as_tensor(v) for v in inputs], None


def _set_output_tensors(model, outputs):
    try:
        setattr(model, "output_tensors", outputs)
    except (AttributeError, TypeError):
        pass  # a model that cannot carry attributes (a bound method): outputs are returned anyway


def _optimizer_handles(optimizers):
    if optimizers is None:
        return (P * 1)(), 0
    if not isinstance(optimizers, (list, tuple)):
        optimizers = [optimizers]
    return (P * max(1, len(optimizers)))(*[o.handle for o in optimizers]), len(optimizers)


class SambaSession(DataParallelSession):
    """A session: a thread pool, a seed, profiles, and the loaded PEF."""

    def __init__(self, pef_path="", num_threads=0, seed=0, native=None):
        """A new session, or (native) one around an existing NativeSession."""
        if native is None:
            with Owned("session_options") as opts:
                call("samba_session_options_set_num_threads", opts, ctypes.c_int32(num_threads))
                call("samba_session_options_set_seed", opts, ctypes.c_uint64(seed))
                native = NativeSession(out_handle("samba_session_create", opts))
        self._native = native
        self._tracing = threading.local()
        ## The outputs of the last trace_graph (empty before one), also set as model.output_tensors.
        self.output_tensors = []
        self._run_options = {}  # selection -> samba_run_options, see run()
        if pef_path:
            self.reset(pef_path)

    @property
    def handle(self):
        """The native samba_session handle (for calls into the C API)."""
        return self._native.handle

    @property
    def _h(self):
        return self._native.handle

    # ---- compiling ---------------------------------------------------------------------
    @property
    def tracing(self):
        """Whether a model is being compiled or traced now (ops are recorded, not computed)."""
        out = ctypes.c_int32()
        call("samba_session_is_tracing", self._h, ctypes.byref(out))
        return bool(out.value)

    def compile(self, model, inputs, optimizers=None, name="", loss_indices=None, io_host_memory=None,
                pef_path=None, inference=False, batch_size=0, micro_batch_size=0, opt_level=1,
                init_output_grads=True, mapping="section", grad_accumulation=False, metadata=None,
                data_parallel=False, world_size=None, bucket_bytes=0, mixed_precision=None, **_deprecated):
        """Traces `model(*inputs)` with its optimizers and writes the PEF
        (pef_path, or '<name>.pef'); returns the path.

        Which outputs are losses (the compiler decides, for every binding):
        with `loss_indices`, exactly those outputs are differentiated, each
        from a gradient of ones. Without it every output is differentiated:
        scalar outputs from ones and, when there is one, the non-scalar
        outputs (a model returning `loss, logits`) from zeros, so they do not
        count as losses (give them values with trace_graph's custom_grads or
        run's grad_of_outputs). When no output is a scalar, every output is a
        loss (as if its sum were) and the compiler warns about each one;
        pass loss_indices if that is not meant.

        `model` may also be an ONNX model: an onnx.ModelProto, its bytes, a
        path to an .onnx file, or an onnx_import.OnnxModel (whose parameters()
        an optimizer trains); docs/onnx.md.

        data_parallel (--data-parallel -ws N): the PEF runs on `world_size`
        replicas (default: this job's size), each on its share of the batch,
        with a REDUCE section averaging the gradients in buckets of about
        `bucket_bytes` (0: 25 MiB); docs/DISTRIBUTED.md.

        mixed_precision (--mixed-precision): "bf16" runs matrix products and
        convolutions on bf16 operands with fp32 accumulation and keeps
        reductions, softmax, normalizations and losses in fp32; parameters
        stay fp32 master weights (docs/user-guide.md, "Mixed precision").
        None or "none": the dtypes the model traced. Other values raise
        ValueError. Inside disable_graphamp() the compile is fp32."""
        name = name or ("onnx_model" if is_onnx_model(model) else getattr(type(model), "__name__", "model")) or "model"
        tensors, keys = _inputs(inputs)
        cb = _model_callback(model, keys)
        with self._compile_options(name, pef_path or f"{name}.pef", inference, batch_size, micro_batch_size,
                                   opt_level, loss_indices, io_host_memory, mapping, grad_accumulation,
                                   metadata, self._mixed_precision(mixed_precision)) as co:
            self._set_compile_data_parallel(co, data_parallel, world_size, bucket_bytes)
            opts, n_opts = _optimizer_handles(None if inference else optimizers)
            self._run_model_call("samba_session_compile", cb, self._h, cb.fn, cb.user_data, to_handles(tensors),
                                 ctypes.c_size_t(len(tensors)), opts, ctypes.c_size_t(n_opts), co)
        return pef_path or f"{name}.pef"

    @staticmethod
    def _compile_options(name, path, inference=False, batch_size=0, micro_batch_size=0, opt_level=1,
                         loss_indices=None, io_host_memory=None, mapping="section", grad_accumulation=False,
                         metadata=None, mixed_precision=None):
        """samba_compile_options for these settings, released on leaving `with`."""
        co = Owned("compile_options")
        try:
            call("samba_compile_options_set_name", co, name.encode())
            if path:
                call("samba_compile_options_set_pef_path", co, path.encode())
            call("samba_compile_options_set_inference", co, ctypes.c_int32(1 if inference else 0))
            call("samba_compile_options_set_opt_level", co, ctypes.c_int32(opt_level))
            if mixed_precision is not None:
                try:
                    call("samba_compile_options_set_mixed_precision", co, str(mixed_precision).encode())
                except SambaError as e:
                    raise ValueError(e.message) from e
            call("samba_compile_options_set_io_host_memory", co, ctypes.c_int32(1 if io_host_memory else 0))
            call("samba_compile_options_set_mapping", co, (mapping or "section").encode())
            call("samba_compile_options_set_grad_accumulation", co, ctypes.c_int32(1 if grad_accumulation else 0))
            if batch_size:
                call("samba_compile_options_set_batch_size", co, ctypes.c_int64(batch_size))
            if micro_batch_size:
                call("samba_compile_options_set_micro_batch_size", co, ctypes.c_int64(micro_batch_size))
            if loss_indices is not None:
                flat = [i for li in loss_indices for i in (li if isinstance(li, (tuple, list)) else (li,))]
                arr = (ctypes.c_int64 * max(1, len(flat)))(*flat)
                call("samba_compile_options_set_loss_indices", co, arr, ctypes.c_size_t(len(flat)))
            for k, v in (metadata or {}).items():
                call("samba_compile_options_add_metadata", co, str(k).encode(), str(v).encode())
        except BaseException:
            co.close()
            raise
        return co

    def _run_model_call(self, fn, cb, *args):
        try:
            call(fn, *args)
        except Exception as e:
            if cb.error is not None:
                raise e from cb.error
            raise

    def trace_graph(self, model, inputs, optimizers=None, pef_path="", init_output_grads=True,
                    transfer_device=True, unspecified_grads=(), custom_grads=None, data_parallel_mode="normal"):
        """utils.trace_graph: loads the PEF after checking `model` against it;
        returns the traced outputs (also set as model.output_tensors).

        With init_output_grads, each output's gradient starts from the value
        compiled into the PEF (see compile: ones for a loss, zeros for an
        output that is not one), except the outputs named in
        unspecified_grads (zeros) and in custom_grads (the given values)."""
        if not pef_path:
            raise ValueError("trace_graph: pef is required (the path compile wrote)")
        tensors, keys = _inputs(inputs)
        cb = _model_callback(model, keys) if model is not None else None
        with Owned("trace_options") as to:
            call("samba_trace_options_set_init_output_grads", to, ctypes.c_int32(1 if init_output_grads else 0))
            call("samba_trace_options_set_transfer_device", to, ctypes.c_int32(1 if transfer_device else 0))
            call("samba_trace_options_set_data_parallel_mode", to, data_parallel_mode.encode())
            for name in unspecified_grads:
                call("samba_trace_options_add_unspecified_grad", to, name.encode())
            for name, value in (custom_grads or {}).items():
                v = as_tensor(value)
                call("samba_trace_options_set_custom_grad", to, name.encode(), v.handle)
            opts, n_opts = _optimizer_handles(optimizers)
            outs = (P * _MAX_OUTPUTS)()
            n = c_size()
            self._run_model_call("samba_session_trace_graph", cb, self._h, cb.fn if cb else None,
                                 cb.user_data if cb else None,
                                 to_handles(tensors), ctypes.c_size_t(len(tensors)), opts, ctypes.c_size_t(n_opts),
                                 pef_path.encode(), to, outs, ctypes.c_size_t(_MAX_OUTPUTS), ctypes.byref(n))
        self.output_tensors = [SambaTensor._wrap(outs[i]) for i in range(n.value)]
        if model is not None:
            _set_output_tensors(model, self.output_tensors)
        return self.output_tensors

    def use_static_functional(self):
        """True while tracing: ops record a graph instead of computing."""
        return self.tracing

    def use_legacy_names(self, use):
        """Accepted for compatibility: Samba has one op naming."""
        self._legacy_names = bool(use)

    @contextlib.contextmanager
    def disable_graphamp(self):
        """Compiles inside the block are fp32 whatever their mixed_precision
        (SambaFlow's way to keep a graph out of automatic mixed precision)."""
        before = getattr(self, "_graphamp_disabled", False)
        self._graphamp_disabled = True
        try:
            yield
        finally:
            self._graphamp_disabled = before

    def _mixed_precision(self, mode):
        return "none" if getattr(self, "_graphamp_disabled", False) else mode

    # ---- multigraph ----------------------------------------------------------------------
    def add_graph(self, graph, overwrite=False):
        """Appends a SambaGraph for compile_multigraph; a graph named like one already added is an error
        unless `overwrite`, which replaces it and moves it to the end."""
        call("samba_session_add_graph", self._h, graph.handle, ctypes.c_int32(1 if overwrite else 0))
        self._graphs = [g for g in getattr(self, "_graphs", []) if not (overwrite and g.name == graph.name)]
        self._graphs.append(graph)

    def compile_multigraph(self, name="", samba_only=False, pef_path=None, opt_level=1, mixed_precision=None,
                           **_deprecated):
        """Compiles the added graphs, in order, into one PEF; returns its path. mixed_precision: as compile's."""
        name = name or "multigraph"
        with self._compile_options(name, pef_path or f"{name}.pef", opt_level=opt_level,
                                   mixed_precision=self._mixed_precision(mixed_precision)) as co:
            call("samba_session_compile_multigraph", self._h, co)
        return pef_path or f"{name}.pef"

    def init_multigraph_runtime(self, pef, transfer_device=True):
        """Loads the multigraph PEF at `pef`; with transfer_device, copies the compiled tensors'
        values to the device and sets every output gradient to ones."""
        call("samba_session_init_multigraph_runtime", self._h, pef.encode(), ctypes.c_int32(1 if transfer_device else 0))

    def trace_multigraph(self, graph):
        """The traced outputs of an added graph (a SambaGraph, or the model it was made from)."""
        found = [g for g in getattr(self, "_graphs", []) if g is graph or g.model is graph]
        if not found:
            raise ValueError("trace_multigraph: the graph was not added to this session (add_graph)")
        graph = found[-1]
        outs = (P * _MAX_OUTPUTS)()
        n = c_size()
        self._run_model_call("samba_session_trace_multigraph", graph.callback, self._h, graph.handle, outs,
                             ctypes.c_size_t(_MAX_OUTPUTS), ctypes.byref(n))
        result = [SambaTensor._wrap(outs[i]) for i in range(n.value)]
        _set_output_tensors(graph.model, result)
        return result

    # ---- running -----------------------------------------------------------------------
    def run(self, input_tensors=None, output_tensors=(), hyperparam_dict=None, data_parallel=None,
            reduce_on_rdu=None, section_ids=(), section_types=(), run_until_call_id=None,
            run_from_call_id=None, data_parallel_mode=None, train=True, grad_of_outputs=None, graph_name=None):
        """SambaSession.run: transfers the inputs, runs the selected sections, returns the outputs.
        graph_name (a SambaGraph's name) runs only that graph's sections; a multigraph PEF needs it
        unless section_ids or a call range name the calls.
        data_parallel: the PEF's REDUCE section averages the gradients over the
        job's replicas, in data_parallel_mode "normal", "inorder" or "optimal",
        reduce_on_rdu in device memory or else through pinned host buffers
        (the same results either way); a None argument takes
        set_data_parallel_defaults' value (the app's command line)."""
        # Options made only of the selection (no argin values, gradients or data
        # parallelism) are made once per selection and reused: making them costs
        # several C calls per run, as much as running a small model. The engine
        # only reads them, so runs on many threads share them.
        data_parallel = self._data_parallel_args(data_parallel, reduce_on_rdu, data_parallel_mode)
        plain = not hyperparam_dict and not grad_of_outputs and not data_parallel[0]
        key = (graph_name, tuple(section_types), tuple(section_ids), run_from_call_id, run_until_call_id,
               bool(train)) if plain else None
        ro = self._run_options.get(key) if plain else None
        if ro is None:
            ro = self._make_run_options(hyperparam_dict, section_ids, section_types, run_until_call_id,
                                        run_from_call_id, train, grad_of_outputs, graph_name, data_parallel)
            if plain:
                if len(self._run_options) >= _MAX_CACHED_RUN_OPTIONS:
                    self._run_options.clear()  # a caller stepping through call ranges
                self._run_options[key] = ro
        try:
            ins = list(input_tensors or [])
            outs = (P * _MAX_OUTPUTS)()
            n = c_size()
            call("samba_session_run", self._h, to_handles(ins), ctypes.c_size_t(len(ins)),
                 to_handles(list(output_tensors)), ctypes.c_size_t(len(output_tensors)), ro, outs,
                 ctypes.c_size_t(_MAX_OUTPUTS), ctypes.byref(n))
        finally:
            if not plain:
                ro.close()
        return [SambaTensor._wrap(outs[i]) for i in range(n.value)]

    @staticmethod
    def _make_run_options(hyperparam_dict, section_ids, section_types, run_until_call_id, run_from_call_id,
                          train, grad_of_outputs, graph_name, data_parallel):
        """New samba_run_options for a run (the caller closes them); data_parallel is
        the resolved (data_parallel, reduce_on_rdu, mode) of _data_parallel_args."""
        ro = Owned("run_options")
        try:
            if graph_name:
                call("samba_run_options_set_graph_name", ro, graph_name.encode())
            for k, v in (hyperparam_dict or {}).items():
                call("samba_run_options_set_hyperparam", ro, k.encode(), ctypes.c_double(float(v)))
            if section_types:
                call("samba_run_options_set_section_types", ro, strings(list(section_types)),
                     ctypes.c_size_t(len(section_types)))
            if section_ids:
                ids = (ctypes.c_int32 * len(section_ids))(*section_ids)
                call("samba_run_options_set_section_ids", ro, ids, ctypes.c_size_t(len(section_ids)))
            if run_from_call_id is not None or run_until_call_id is not None:
                call("samba_run_options_set_call_range", ro,
                     ctypes.c_int64(-1 if run_from_call_id is None else run_from_call_id),
                     ctypes.c_int64(-1 if run_until_call_id is None else run_until_call_id))
            call("samba_run_options_set_train", ro, ctypes.c_int32(1 if train else 0))
            if grad_of_outputs:
                kept = [as_tensor(g) if g is not None else None for g in grad_of_outputs]
                grads = (P * len(kept))(*[g.handle if g is not None else None for g in kept])
                call("samba_run_options_set_grad_of_outputs", ro, grads, ctypes.c_size_t(len(grad_of_outputs)))
            set_run_options_data_parallel(ro, data_parallel)
        except BaseException:
            ro.close()
            raise
        return ro

    def _names(self, kind):
        n = c_size()
        call("samba_session_name_count", self._h, ctypes.c_int32(_NAMES[kind]), ctypes.byref(n))
        out = []
        for i in range(n.value):
            s = ctypes.c_char_p()
            call("samba_session_name_at", self._h, ctypes.c_int32(_NAMES[kind]), ctypes.c_size_t(i), ctypes.byref(s))
            out.append(s.value.decode())
        return out

    def get_section_types(self):
        """The loaded PEF's section types (FWD, BCKWD, OPT, ...), in schedule order."""
        return self._names("section_types")

    def get_weight_names(self):
        """The names of the loaded PEF's parameters."""
        return self._names("weights")

    def get_argin_names(self):
        """The names of the loaded PEF's run-time arguments (learning rate, dropout rates and seeds, ...)."""
        return self._names("argins")

    def get_dropout_rate_argin_names(self):
        """The names of the run-time arguments holding dropout rates."""
        return self._names("dropout_rate")

    def get_dropout_seed_argin_names(self):
        """The names of the run-time arguments holding dropout seeds."""
        return self._names("dropout_seed")

    def get_tensors_by_name(self, names):
        """New host tensors holding the device values of the named tensors, in order."""
        outs = (P * max(1, len(names)))()
        call("samba_session_get_tensors_by_name", self._h, strings(list(names)), ctypes.c_size_t(len(names)), outs)
        return [SambaTensor._wrap(outs[i]) for i in range(len(names))]

    def get_tensors(self, samba_tensors, gather=False):
        """get_tensors_by_name of the tensors' sn_names: this replica's
        values (a replicated parameter is the same on every rank). With
        gather, every replica's values of each (an output's per-replica
        rows) concatenated on rank 0, None on the others
        (gather_tensors_by_name; every rank must call it)."""
        names = [t.sn_name for t in samba_tensors]
        return self.gather_tensors_by_name(names) if gather else self.get_tensors_by_name(names)

    def get_samba_tensor_by_name(self, name):
        """The host tensor registered under `name` by the last compile or trace_graph (the same
        tensor, not a copy)."""
        return SambaTensor._wrap(out_handle("samba_session_get_samba_tensor_by_name", self._h, name.encode()))

    def update_tensor(self, name, tensor):
        """Registers `tensor` under `name`, replacing what was there; None removes the name."""
        call("samba_session_update_tensor", self._h, name.encode(), tensor.handle if tensor is not None else None)

    def reset(self, pef_path=""):
        """Loads the PEF at `pef_path`, or with no path unloads the program."""
        if pef_path:
            call("samba_session_load_pef", self._h, pef_path.encode())
        else:
            call("samba_session_unload", self._h)

    def _transfer(self, fn, what):
        call(fn, self._h, ctypes.c_uint32(what))

    def to_cpu(self, model=None, optims=None, inplace=False):
        """Copies parameters and buffers (and with `optims`, the optimizer state) from the device to
        their host tensors; returns `model`."""
        self._transfer("samba_session_to_cpu", 1 | 2 | (4 if optims else 0))
        return model

    def to_cpu_(self, model=None, optims=None):
        """to_cpu, SambaFlow's in-place spelling."""
        return self.to_cpu(model, optims, inplace=True)

    def to_rdu(self, model=None, optims=None):
        """Copies parameters and buffers (and with `optims`, the optimizer state) from their host tensors
        to the device; returns `model`."""
        self._transfer("samba_session_to_rdu", 1 | 2 | (4 if optims else 0))
        return model

    ## SambaFlow's other name of to_rdu.
    to_device = to_rdu

    def sync_buffers_to_cpu(self, model=None, inplace=False):
        """Copies the buffers (not the parameters) from the device to their host tensors."""
        self._transfer("samba_session_to_cpu", 2)

    def sync_buffers_to_rdu(self, model=None):
        """Copies the buffers (not the parameters) from their host tensors to the device."""
        self._transfer("samba_session_to_rdu", 2)

    def init_output_grads(self, unspecified=(), custom=None):
        """Sets the gradients of the loaded PEF's outputs to ones, except those named in `unspecified`
        (zero, for the app to set) and those in `custom` (name -> value)."""
        custom = custom or {}
        names = list(custom)
        kept = [as_tensor(custom[k]) for k in names]
        vals = (P * max(1, len(names)))(*[v.handle for v in kept])
        call("samba_session_init_output_grads", self._h, strings(list(unspecified)), ctypes.c_size_t(len(unspecified)),
             strings(names), vals, ctypes.c_size_t(len(names)))

    def measure_performance(self, inputs, iterations=10, warmup=2, section_types=(), data_parallel=None,
                            reduce_on_rdu=None, data_parallel_mode=None):
        """Throughput and latency of `iterations` runs (after `warmup`), as a
        dict. Data parallel, samples_per_second is the job's (every rank's
        batch over the slowest rank's time) and batch_size the global batch;
        world_size says how many replicas."""
        tensors, _ = _inputs(inputs)
        rep = _PerfReport(struct_size=ctypes.sizeof(_PerfReport))
        with Owned("run_options") as ro:
            dp = self._set_run_data_parallel(ro, data_parallel, reduce_on_rdu, data_parallel_mode)
            if section_types:
                call("samba_run_options_set_section_types", ro, strings(list(section_types)),
                     ctypes.c_size_t(len(section_types)))
            call("samba_session_measure_performance", self._h, to_handles(tensors), ctypes.c_size_t(len(tensors)),
                 ro, ctypes.c_int64(iterations), ctypes.c_int64(warmup), ctypes.byref(rep))
        report = _report(rep)
        report["world_size"] = distributed.get_world_size() if dp else 1
        return report

    def measure_sections(self, inputs, iterations=10, warmup=2):
        """One report per section of the schedule, each section timed alone."""
        tensors, _ = _inputs(inputs)
        n = c_size()
        args = (self._h, to_handles(tensors), ctypes.c_size_t(len(tensors)), ctypes.c_int64(iterations),
                ctypes.c_int64(warmup))
        status = lib.samba_session_measure_sections(*args, None, ctypes.c_size_t(0), ctypes.byref(n))
        if status not in (0, 3):  # OUT_OF_RANGE only says how many sections there are
            check(status)
        reps = (_PerfReport * max(1, n.value))()
        for r in reps:
            r.struct_size = ctypes.sizeof(_PerfReport)
        call("samba_session_measure_sections", *args, reps, ctypes.c_size_t(n.value), ctypes.byref(n))
        return [_report(reps[i]) for i in range(n.value)]

    # ---- checkpoints and profiles --------------------------------------------------------
    def save_checkpoint(self, path, what=("parameters", "optimizer_state")):
        """Writes the `what` kinds of tensors ('parameters', 'buffers', 'optimizer_state') to a checkpoint
        file at `path`."""
        call("samba_session_save_checkpoint", self._h, path.encode(),
             ctypes.c_uint32(sum(_TRANSFER[w] for w in what)))

    def load_checkpoint(self, path, what=("parameters", "optimizer_state"), strict=True):
        """Reads the `what` kinds of tensors from the checkpoint at `path`; with strict, a tensor the
        checkpoint lacks is an error."""
        call("samba_session_load_checkpoint", self._h, path.encode(),
             ctypes.c_uint32(sum(_TRANSFER[w] for w in what)), ctypes.c_int32(1 if strict else 0))

    def save_safetensors(self, path, include_optimizer_state=False, include_buffers=True):
        """Writes the loaded PEF's parameters (and buffers, and optimizer state as
        "<param>.<state>" when asked) to a Hugging Face safetensors file that
        safetensors.torch.load_file and transformers read. Atomic."""
        what = _TRANSFER["parameters"]
        what |= _TRANSFER["buffers"] if include_buffers else 0
        what |= _TRANSFER["optimizer_state"] if include_optimizer_state else 0
        call("samba_session_save_safetensors", self._h, os.fspath(path).encode(), ctypes.c_uint32(what))

    def load_safetensors(self, path, name_map=None, strict=True, what=("parameters", "buffers")):
        """Loads a safetensors file (save_pretrained(safe_serialization=True),
        safetensors.torch.save_file) into the device tensors, as torch's
        load_state_dict(strict=) does. name_map: {file prefix or name: session
        prefix or name}, e.g. {"transformer.": ""}; the whole name wins over a
        prefix, then the longest prefix. The file is validated whole first: a
        failed load changes nothing."""
        rules = list((name_map or {}).items())
        call("samba_session_load_safetensors", self._h, os.fspath(path).encode(),
             ctypes.c_uint32(sum(_TRANSFER[w] for w in what)),
             strings([r[0] for r in rules]) if rules else None, strings([r[1] for r in rules]) if rules else None,
             ctypes.c_size_t(len(rules)), ctypes.c_int32(1 if strict else 0))

    def start_samba_profile(self):
        """Starts recording the profiler's events."""
        call("samba_session_start_profile", self._h)

    def end_samba_profile(self, filename=None):
        """Stops the profiler; writes its trace (Chrome trace JSON) to `filename` when given."""
        call("samba_session_end_profile", self._h, filename.encode() if filename else None)

    @contextlib.contextmanager
    def samba_profile(self, filename=None):
        """A context manager profiling its body: start_samba_profile, then end_samba_profile(filename)."""
        self.start_samba_profile()
        try:
            yield self
        finally:
            self.end_samba_profile(filename)

    def start_runtime_profile(self, timer_enabled=True):
        """Starts counting time per section; timer_enabled adds the wall time to the report."""
        call("samba_session_start_runtime_profile", self._h, ctypes.c_int32(1 if timer_enabled else 0))

    def end_runtime_profile(self, log_file="cprofile_tmp.log"):
        """Stops the runtime profile and writes its per-section table to `log_file` (None: only to the log)."""
        call("samba_session_end_runtime_profile", self._h, log_file.encode() if log_file else None)

    # ---- lazy parameters, random state, pinned memory ------------------------------------
    def enable_lazy_param(self, seed=None, init_threads=8, inverse_transform_sampling=False,
                          fp32_to_bf16_rounding="nearest_even"):
        """Lazy parameter mode: parameters created from now on are placeholders, materialized on the
        device at the first run (in `init_threads` threads, from `seed` when given)."""
        if fp32_to_bf16_rounding not in ("nearest_even", "truncation"):
            raise ValueError(f"fp32_to_bf16_rounding must be 'nearest_even' or 'truncation', got "
                             f"{fp32_to_bf16_rounding!r}")
        with Owned("lazy_param_options") as lo:
            if seed is not None:
                call("samba_lazy_param_options_set_seed", lo, ctypes.c_uint64(seed))
            call("samba_lazy_param_options_set_init_threads", lo, ctypes.c_int32(init_threads))
            call("samba_lazy_param_options_set_inverse_transform_sampling", lo,
                 ctypes.c_int32(1 if inverse_transform_sampling else 0))
            call("samba_lazy_param_options_set_bf16_rounding", lo,
                 ctypes.c_int32(0 if fp32_to_bf16_rounding == "nearest_even" else 1))
            call("samba_session_enable_lazy_param", self._h, lo)

    def disable_lazy_param(self):
        """Parameters created from now on are materialized at once; placeholders already made stay lazy."""
        call("samba_session_disable_lazy_param", self._h)

    def use_lazy_param(self):
        """Whether the session is in lazy parameter mode."""
        out = ctypes.c_int32()
        call("samba_session_use_lazy_param", self._h, ctypes.byref(out))
        return bool(out.value)

    def reset_random_generator(self):
        """Restarts the session's random draws, so they repeat from the seed."""
        call("samba_session_reset_random_generator", self._h)

    def set_seed(self, seed):
        """The seed of the session's random draws (random tensors, lazy parameters without their own)."""
        call("samba_session_set_seed", self._h, ctypes.c_uint64(seed))

    def random_stream(self):
        """(seed, stream) of the next random draw: the `seed` and `offset` attributes of rand, randn,
        randint or normal."""
        seed, stream = ctypes.c_uint64(), ctypes.c_uint64()
        call("samba_session_random_stream", self._h, ctypes.byref(seed), ctypes.byref(stream))
        return seed.value, stream.value

    def enable_pinned_memory(self):
        """Host tensors created from now on are allocated from the pinned-memory pool."""
        call("samba_session_enable_pinned_memory", self._h)

    def disable_pinned_memory(self):
        """Host tensors created from now on are allocated normally."""
        call("samba_session_disable_pinned_memory", self._h)

    def use_pinned_memory(self):
        """Whether host tensors are allocated from the pinned-memory pool."""
        out = ctypes.c_int32()
        call("samba_session_use_pinned_memory", self._h, ctypes.byref(out))
        return bool(out.value)

    # ---- compatibility and process exit ---------------------------------------------------
    @property
    def profiler(self):
        """The Samba profiler: start(), end(filename), and a context manager."""
        return _Profiler(self)

    def setup(self, args):
        """Applies an argument object's settings (seed, num_threads are read when present)."""
        ## The argument object given to setup(), kept for the app to read back.
        self.args = args
        seed = getattr(args, "seed", None)
        if seed is not None:
            self.set_seed(seed)


class _Profiler:
    def __init__(self, s):
        self._s = s

    def start(self):
        """Starts the profiler (SambaSession.start_samba_profile)."""
        self._s.start_samba_profile()

    def end(self, filename=None):
        """Stops the profiler and writes its trace to `filename` when given."""
        self._s.end_samba_profile(filename)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.end(None)


def _report(rep):
    return {f: getattr(rep, f) for f, _ in _PerfReport._fields_ if f != "struct_size"}


## The process's default session: what samba.session and the module-level functions use.
session = SambaSession(native=default_session)
