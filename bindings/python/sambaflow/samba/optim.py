"""samba.optim.SGD and samba.optim.AdamW: optimizers the compiler turns into
OPT sections (their numeric hyperparameters become argins run() can change),
which can also step eagerly on host tensors.

The hyperparameters' names, defaults and valid ranges are the op registry's
(samba_optimizer_schema_json); the keyword arguments below only name them, in
PyTorch's order, and an argument left out takes the registry's default."""
import ctypes
import json

from ._lib import NativeHandle, call, default_session as session, lib, out_handle
from .ops import attrs_handle
from .tensor import to_handles

_schemas = {}


def hyperparameters(kind):
    """The registry's hyperparameters of optimizer `kind` ("sgd", "adamw"):
    a list of {"name", "type", "default", "argin", "range", "doc"}."""
    if kind not in _schemas:
        out = ctypes.c_char_p()
        call("samba_optimizer_schema_json", kind.encode(), ctypes.byref(out))
        _schemas[kind] = json.loads(out.value.decode())
    return _schemas[kind]


class Optimizer(NativeHandle, release="samba_optimizer_release"):
    """An optimizer of the registry (torch.optim's interface): `params` is a list of parameters
    or of param-group dicts; step() runs on the host, and a compile traces it into the OPT section."""

    ## The registry's name of the optimizer ("sgd", "adamw"); set by each subclass.
    kind = ""

    def __init__(self, params, **hyper):
        given = {k: v for k, v in hyper.items() if v is not None}
        # What torch.optim's `defaults` holds: every hyperparameter's value.
        ## Every hyperparameter's value: the schema's defaults overridden by those given (torch.optim's `defaults`).
        self.defaults = {h["name"]: h["default"] for h in hyperparameters(self.kind)}
        self.defaults.update(given)
        ah = attrs_handle(given)
        try:
            super().__init__(out_handle("samba_optimizer_create", self.kind.encode(), ah))
        finally:
            lib.samba_attrs_release(ah)
        ## The parameter groups, each a dict of "params" and its hyperparameters, as in torch.optim.
        self.param_groups = []
        ## torch.optim's per-parameter `state`, for code that reads it: the engine keeps the moments, so it stays empty.
        self.state = {}
        params = list(params)
        if params and isinstance(params[0], dict):
            for g in params:
                self.add_param_group(g)
        elif params:
            self.add_param_group({"params": params})

    def add_param_group(self, group):
        """Adds a group of parameters with its own hyperparameters (the rest from the defaults)."""
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
        """One update of every parameter from its gradient, on the host."""
        call("samba_optimizer_step", session.handle, self._h)

    def zero_grad(self):
        """Sets every parameter's gradient to zero."""
        call("samba_optimizer_zero_grad", self._h)


class SGD(Optimizer):
    """torch.optim.SGD: momentum, dampening, weight decay, Nesterov; max_grad_norm clips the
    gradients' global norm first. An unset hyperparameter takes the registry's default."""

    ## The registry's name of this optimizer.
    kind = "sgd"

    def __init__(self, params, lr=None, momentum=None, dampening=None, weight_decay=None, nesterov=None,
                 maximize=None, max_grad_norm=None):
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                         nesterov=nesterov, maximize=maximize, max_grad_norm=max_grad_norm)


class AdamW(Optimizer):
    """torch.optim.AdamW (decoupled weight decay); `betas` or beta1 / beta2, amsgrad; max_grad_norm
    clips the gradients' global norm first. An unset hyperparameter takes the registry's default."""

    ## The registry's name of this optimizer.
    kind = "adamw"

    def __init__(self, params, lr=None, betas=None, eps=None, weight_decay=None, amsgrad=None, maximize=None,
                 max_grad_norm=None, beta1=None, beta2=None):
        # betas is PyTorch's spelling; the optimizer and run()'s
        # hyperparam_dict name the two argins beta1 and beta2.
        if betas is not None:
            beta1, beta2 = (float(b) for b in betas)
        super().__init__(params, lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize, max_grad_norm=max_grad_norm)
