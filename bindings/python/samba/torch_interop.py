"""PyTorch interop: SambaTensors in and out of torch without copies, models
whose parameters become SambaTensors, and __torch_function__ dispatch, so
that unmodified torch.nn modules and torch.nn.functional calls on
SambaTensors run Samba ops (traced while compiling, computed otherwise).

Which torch function becomes which registry op is data: _TABLE below lists,
per torch function, the registry op and torch's parameters in order, with
how each maps to the op (same name, renamed, or dropped when it has the
value that needs nothing). Functions not in the table whose name is a
registry op are called through the generated op function."""
from ._lib import SambaError
from . import dtypes

# (torch function, registry op, torch parameters). A parameter is `name`
# (the op's input or attribute of that name), `name:opname` (renamed),
# `name=VALUE` (accepted only with that value, then dropped) or `name=*`
# (always dropped).
_TABLE = [
    ("nn.functional.linear", "linear", "input:x weight bias"),
    ("nn.functional.layer_norm", "layer_norm", "input:x normalized_shape weight bias eps"),
    ("nn.functional.conv2d", "conv2d", "input:x weight bias stride padding dilation groups"),
    ("nn.functional.cross_entropy", "cross_entropy",
     "input target weight size_average=None ignore_index reduce=None reduction label_smoothing"),
    ("nn.functional.nll_loss", "nll_loss", "input target weight size_average=None ignore_index reduce=None reduction"),
    ("nn.functional.mse_loss", "mse_loss", "input target size_average=None reduce=None reduction"),
    ("nn.functional.relu", "relu", "input:x inplace=False"),
    ("relu", "relu", "input:x"),
    ("nn.functional.gelu", "gelu", "input:x approximate"),
    ("tanh", "tanh", "input:x"),
    ("sigmoid", "sigmoid", "input:x"),
    ("nn.functional.tanh", "tanh", "input:x"),
    ("nn.functional.sigmoid", "sigmoid", "input:x"),
    ("nn.functional.softmax", "softmax", "input:x dim _stacklevel=* dtype=None"),
    ("nn.functional.log_softmax", "log_softmax", "input:x dim _stacklevel=* dtype=None"),
    ("softmax", "softmax", "input:x dim dtype=None"),
    ("nn.functional.dropout", "dropout", "input:x p training inplace=False"),
    ("nn.functional.embedding", "embedding",
     "input:indices weight padding_idx max_norm=None norm_type=2.0 scale_grad_by_freq=False sparse=False"),
    ("nn.functional.max_pool2d", "max_pool2d",
     "input:x kernel_size stride padding dilation ceil_mode return_indices=False"),
    ("nn.functional.avg_pool2d", "avg_pool2d",
     "input:x kernel_size stride padding ceil_mode count_include_pad divisor_override=None"),
    ("flatten", "flatten", "input:x start_dim end_dim"),
    ("matmul", "matmul", "input:a other:b"),
    ("add", "add", "input:a other:b alpha"),
    ("sub", "sub", "input:a other:b alpha"),
    ("mul", "mul", "input:a other:b"),
    ("div", "div", "input:a other:b"),
    ("cat", "cat", "tensors dim"),
    ("transpose", "transpose", "input:x dim0 dim1"),
    ("sum", "sum", "input:x dim keepdim dtype"),
    ("mean", "mean", "input:x dim keepdim dtype"),
    ("exp", "exp", "input:x"),
    ("log", "log", "input:x"),
]

_REVERSED = {"__radd__": "add", "__rsub__": "sub", "__rmul__": "mul", "__rtruediv__": "div",
             "__rmatmul__": "matmul", "__rpow__": "pow"}
_DUNDER = {"__add__": "add", "__sub__": "sub", "__mul__": "mul", "__truediv__": "div", "__matmul__": "matmul",
           "__pow__": "pow", "__eq__": "eq", "__ne__": "ne", "__lt__": "lt", "__le__": "le", "__gt__": "gt",
           "__ge__": "ge", "__neg__": "neg"}
_resolved = None


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError("this needs PyTorch, which is not installed (Debian: python3-torch; or pip install "
                          "torch)") from e
    return torch


def _parse(spec):
    params = []
    for token in spec.split():
        name, _, fixed = token.partition("=")
        name, _, op_name = name.partition(":")
        params.append((name, op_name or name, fixed if "=" in token else None))
    return params


def _table():
    global _resolved
    if _resolved is None:
        torch = _torch()
        _resolved = {}
        for path, op, spec in _TABLE:
            obj = torch
            for part in path.split("."):
                obj = getattr(obj, part, None)
            if obj is not None:
                _resolved[obj] = (op, _parse(spec), path)
    return _resolved


def _attr_value(v):
    torch = _torch()
    if isinstance(v, torch.dtype):
        return dtypes.from_name(v)
    if isinstance(v, (torch.Size, tuple)):
        return list(v)
    return v


def _call_table(entry, args, kwargs):
    from .ops import call_op, schema
    from .tensor import as_tensor
    op, params, path = entry
    if len(args) > len(params):
        raise TypeError(f"torch.{path}: {len(args)} positional arguments; Samba maps at most {len(params)}")
    bound = dict(zip((p[0] for p in params), args))
    names = {p[0] for p in params}
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"torch.{path}: argument '{k}' is not supported by Samba's {op}")
        bound[k] = v
    sch = schema(op)
    inputs = {i["name"]: i for i in sch["inputs"]}
    tensors, attrs = {}, {}
    for name, op_name, fixed in params:
        if name not in bound:
            continue
        v = bound[name]
        if fixed == "*":
            continue
        if fixed is not None:
            if repr(v) != fixed and str(v) != fixed:
                raise SambaError("SAMBA_ERR_UNSUPPORTED",
                                 f"torch.{path}: {name}={v!r} is not supported on Samba (only {fixed})")
            continue
        if op_name in inputs:
            if inputs[op_name].get("variadic"):
                tensors[op_name] = [as_tensor(t) for t in v]
            else:
                tensors[op_name] = None if v is None else as_tensor(v)
        elif v is not None:
            attrs[op_name] = _attr_value(v)
    ordered = []
    for spec in sch["inputs"]:
        value = tensors.get(spec["name"])
        if spec.get("variadic"):
            ordered.extend(value or [])
        else:
            ordered.append(value)
    while ordered and ordered[-1] is None:
        ordered.pop()
    return call_op(op, ordered, attrs)


def dispatch(func, args, kwargs):
    """SambaTensor.__torch_function__: the Samba op for a torch function."""
    from .ops import op_function
    from .tensor import as_tensor
    entry = _table().get(func)
    if entry is not None:
        return _call_table(entry, args, kwargs)
    name = getattr(func, "__name__", "")
    if name in _REVERSED and len(args) == 2:
        return as_tensor(args[1])._op(_REVERSED[name], args[0])
    if name in _DUNDER:
        return as_tensor(args[0])._op(_DUNDER[name], *args[1:])
    if name == "split":
        return split(*args, **kwargs)
    fn = op_function(name)
    if fn is None:
        raise SambaError("SAMBA_ERR_UNSUPPORTED",
                         f"torch function {getattr(func, '__module__', '') or 'torch'}.{name} has no Samba op; "
                         f"supported: {sorted(p for _, _, p in _table().values())} and the registry ops")
    return fn(*args, **kwargs)


def split(tensor, split_size_or_sections, dim=0):
    """torch.split on a SambaTensor: a tuple of views."""
    from .ops import call_op
    from .tensor import as_tensor
    if isinstance(split_size_or_sections, int):
        attrs = {"split_size": split_size_or_sections, "dim": dim}
    else:
        attrs = {"sections": [int(s) for s in split_size_or_sections], "dim": dim}
    out = call_op("split", [as_tensor(tensor)], attrs)
    return out if isinstance(out, tuple) else (out,)


# ---- tensors ---------------------------------------------------------------------------
def from_torch_tensor(tensor, name=None, batch_dim=None, named_dims=None, region_name=None):
    """A SambaTensor sharing the torch tensor's memory (a SambaTensor is returned as is)."""
    from .tensor import SambaTensor
    if tensor is None or isinstance(tensor, SambaTensor):
        return tensor
    torch = _torch()
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"from_torch_tensor: expected a torch.Tensor or SambaTensor, got {type(tensor).__name__}")
    source = tensor.detach()
    if source.dtype == torch.bool:
        # DLPack bool codes differ between torch versions: share through numpy.
        from .tensor import from_numpy
        t = from_numpy(source.numpy())
    else:
        from .dlpack import from_dlpack
        t = from_dlpack(torch.utils.dlpack.to_dlpack(source))
    t._keep = tensor
    if tensor.requires_grad and tensor.is_leaf:
        t.requires_grad = True
    if name:
        t.sn_name = name
    if region_name:
        t.sn_region_name = region_name
    return t


def torch_view(t):
    """The torch tensor sharing a SambaTensor's memory."""
    torch = _torch()
    keep = t._keep
    if isinstance(keep, torch.Tensor) and keep.data_ptr() == t.data_ptr() and tuple(keep.shape) == t.shape \
            and keep.stride() == t.stride():
        return keep
    if t.dtype == dtypes.bool_:
        import numpy as np
        return torch.from_numpy(np.asarray(t))
    from .dlpack import to_dlpack
    return torch.utils.dlpack.from_dlpack(to_dlpack(t))


def to_torch(obj):
    """A torch tensor for a SambaTensor (sharing memory); torch tensors and None pass through."""
    from .tensor import SambaTensor
    if obj is None:
        return None
    if isinstance(obj, SambaTensor):
        return torch_view(obj)
    torch = _torch()
    if isinstance(obj, torch.Tensor):
        return obj
    raise TypeError(f"to_torch: expected a SambaTensor or torch.Tensor, got {type(obj).__name__}")


def from_torch_model_(model):
    """Converts, in place, every parameter and buffer of a torch.nn.Module into a
    SambaTensor named after its module path ('gemm1.weight'), sharing memory
    with the torch tensor; parameters are marked as such and keep
    requires_grad. Returns the model."""
    torch = _torch()
    from .tensor import SambaTensor
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"from_torch_model_: expected a torch.nn.Module, got {type(model).__name__}")
    converted = {}
    for prefix, module in model.named_modules():
        for table, is_param in ((module._parameters, True), (module._buffers, False)):
            for key, value in list(table.items()):
                if value is None or isinstance(value, SambaTensor):
                    continue
                if id(value) not in converted:
                    st = from_torch_tensor(value, name=f"{prefix}.{key}" if prefix else key)
                    if is_param:
                        st.is_parameter = True
                        st.requires_grad = value.requires_grad
                    converted[id(value)] = st
                # A module checks what it stores under a parameter name: write the dict itself.
                table[key] = converted[id(value)]
    return model
