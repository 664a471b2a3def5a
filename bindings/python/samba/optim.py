"""samba.optim.SGD and samba.optim.AdamW: optimizers the compiler turns into
OPT sections (their numeric hyperparameters become argins run() can change),
which can also step eagerly on host tensors."""
import ctypes

from ._lib import call, default_session as session, lib, out_handle
from .ops import attrs_handle
from .tensor import to_handles


class Optimizer:
    kind = ""

    def __init__(self, params, **defaults):
        defaults = {k: v for k, v in defaults.items() if v is not None}
        ah = attrs_handle(defaults)
        try:
            self._h = out_handle("samba_optimizer_create", self.kind.encode(), ah)
        finally:
            lib.samba_attrs_release(ah)
        self.param_groups = []
        self.state = {}
        params = list(params)
        if params and isinstance(params[0], dict):
            for g in params:
                self.add_param_group(g)
        elif params:
            self.add_param_group({"params": params})

    def __del__(self):
        h = getattr(self, "_h", None)
        if h and lib is not None:
            lib.samba_optimizer_release(h)
            self._h = None

    @property
    def handle(self):
        return self._h

    def add_param_group(self, group):
        params = list(group["params"])
        hyper = {k: v for k, v in group.items() if k != "params"}
        ah = attrs_handle(hyper) if hyper else None
        try:
            call("samba_optimizer_add_param_group", self._h, to_handles(params), ctypes.c_size_t(len(params)), ah)
        finally:
            if ah:
                lib.samba_attrs_release(ah)
        self.param_groups.append(dict(group, params=params))

    def step(self):
        call("samba_optimizer_step", session.handle, self._h)

    def zero_grad(self):
        call("samba_optimizer_zero_grad", self._h)


class SGD(Optimizer):
    kind = "sgd"

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 maximize=False):
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                         nesterov=nesterov, maximize=maximize)


class AdamW(Optimizer):
    kind = "adamw"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.997), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 maximize=False, max_grad_norm=None):
        super().__init__(params, lr=lr, betas=[float(b) for b in betas], eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize, max_grad_norm=max_grad_norm)
