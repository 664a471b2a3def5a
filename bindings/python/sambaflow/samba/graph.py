"""SambaGraph: one graph of a multigraph PEF (session.add_graph, then
session.compile_multigraph), with its model, inputs, optimizers and
per-graph compile settings."""
import ctypes

from ._lib import NativeHandle, out_handle
from .session import SambaSession, _ModelCallback, _inputs, _optimizer_handles
from .tensor import to_handles


class SambaGraph(NativeHandle, release="samba_graph_release"):
    """One graph of a multigraph PEF: its model, inputs, optimizers and compile settings.

    Made with session.add_graph(...) and compiled with session.compile_multigraph(...);
    `inference` leaves the optimizers out, `loss_indices` names the model's loss outputs."""
    def __init__(self, name, model, inputs, optimizers=None, inference=False, batch_size=0, micro_batch_size=0,
                 loss_indices=None, mapping="section", grad_accumulation=False):
        super().__init__()
        ## The graph's name in the PEF.
        self.name = name
        ## The module traced as this graph.
        self.model = model
        self.inputs, keys = _inputs(inputs)
        ## The optimizers traced into the graph's OPT section (None or ignored for inference).
        self.optimizers = optimizers
        # The C graph calls the model whenever it is compiled or traced: keep the callback alive.
        ## The callback the C graph calls to trace the model; held so it outlives the graph.
        self.callback = _ModelCallback(model, keys)
        with SambaSession._compile_options(name, "", inference, batch_size, micro_batch_size, 1, loss_indices,
                                           None, mapping, grad_accumulation) as co:
            opts, n_opts = _optimizer_handles(None if inference else optimizers)
            self._h = out_handle("samba_graph_create", name.encode(), self.callback.fn, None,
                                 to_handles(self.inputs), ctypes.c_size_t(len(self.inputs)), opts,
                                 ctypes.c_size_t(n_opts), co.handle)
