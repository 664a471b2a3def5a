"""__torch_function__ dispatch: unmodified torch.nn modules and
torch.nn.functional calls on SambaTensors run Samba ops (traced while
compiling, computed otherwise). It works on the tensor class SambaTensor
passes in, so it needs nothing above the op layer.

Which torch function becomes which registry op is data: _TABLE below lists,
per torch function, the registry op and torch's parameters in order, with
how each maps to the op (same name, renamed, or dropped when it has the
value that needs nothing). Functions not in the table whose name is a
registry op are called through the generated op function."""
from ._lib import SambaError
from . import dtypes, functional
from .ops import is_op, schema

# (torch function, registry op, torch parameters). A parameter is `name`
# (the op's input or attribute of that name), `name:opname` (renamed),
# `name=VALUE` (accepted only with that value, then dropped) or `name=*`
# (always dropped). An optional fourth item rewrites the bound arguments
# where torch spells a value differently (p='fro').
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
    ("nn.functional.batch_norm", "batch_norm", "input:x running_mean running_var weight bias training momentum eps"),
    ("nn.functional.silu", "silu", "input:x inplace=False"),
    ("nn.functional.leaky_relu", "leaky_relu", "input:x negative_slope inplace=False"),
    ("nn.functional.binary_cross_entropy_with_logits", "binary_cross_entropy_with_logits",
     "input target weight size_average=None reduce=None reduction pos_weight"),
    ("norm", "norm", "input:x p dim keepdim out=None dtype=None", lambda a: _norm_order(a, "p")),
    ("linalg.vector_norm", "norm", "input:x ord:p dim keepdim out=None dtype=None", lambda a: _norm_order(a, "ord")),
    ("nn.functional.normalize", "normalize", "input:x p dim eps out=None"),
    ("cumsum", "cumsum", "input:x dim dtype out=None"),
    ("where", "where", "condition:cond input:a other:b out=None"),
    ("masked_fill", "masked_fill", "input:x mask value", lambda a: _number(a, "value")),
    ("tril", "tril", "input:x diagonal out=None"),
    ("triu", "triu", "input:x diagonal out=None"),
    ("zeros_like", "zeros_like", "input:x dtype layout=None device=* requires_grad=False memory_format=*"),
    ("ones_like", "ones_like", "input:x dtype layout=None device=* requires_grad=False memory_format=*"),
    ("full_like", "full_like",
     "input:x fill_value:value dtype layout=None device=* requires_grad=False memory_format=*",
     lambda a: _number(a, "fill_value")),
    ("bmm", "bmm", "input:a mat2:b"),
    ("baddbmm", "baddbmm", "input batch1:a batch2:b beta alpha"),
    ("gather", "gather", "input:x dim index sparse_grad=False"),
    ("scatter_add", "scatter_add", "input:x dim index src"),
]

# Torch functions whose SambaTensor method has torch's signature (and result
# types: the (values, indices) named tuples), and those that samba.functional
# composes from registry ops.
_METHODS = ("max", "min", "sort", "argsort", "msort", "topk", "kthvalue", "median", "scatter", "index_select")
_COMPOSED = ("einsum", "scaled_dot_product_attention", "_scaled_dot_product_attention",
             "multi_head_attention_forward")


def _norm_order(args, name):
    """torch spells the 2-norm 'fro' (torch.norm's default); the nuclear norm has no op."""
    p = args.get(name, "fro")
    if p == "nuc":
        raise SambaError("SAMBA_ERR_UNSUPPORTED", "torch.norm: p='nuc' (the nuclear norm) is not supported on Samba")
    args[name] = 2.0 if p in ("fro", None) else float(p)
    return args


def _number(args, name):
    """A fill value given as a one-element tensor becomes the number it holds."""
    if hasattr(args.get(name), "item"):
        args[name] = args[name].item()
    return args


_REVERSED = {"__radd__": "add", "__rsub__": "sub", "__rmul__": "mul", "__rtruediv__": "div",
             "__rmatmul__": "matmul", "__rpow__": "pow"}
_DUNDER = {"__add__": "add", "__sub__": "sub", "__mul__": "mul", "__truediv__": "div", "__matmul__": "matmul",
           "__pow__": "pow", "__eq__": "eq", "__ne__": "ne", "__lt__": "lt", "__le__": "le", "__gt__": "gt",
           "__ge__": "ge", "__neg__": "neg"}
_resolved = None


def torch_module():
    """The torch module, or ImportError saying how to install it."""
    try:
        import torch  # optional: only torch interop needs it, so it is imported on first use
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
        torch = torch_module()
        _resolved = {}
        for path, op, spec, *adapt in _TABLE:
            obj = torch
            for part in path.split("."):
                obj = getattr(obj, part, None)
            if obj is not None:
                _resolved[obj] = (op, _parse(spec), path, adapt[0] if adapt else None)
    return _resolved


def _attr_value(v):
    torch = torch_module()
    if isinstance(v, torch.dtype):
        return dtypes.from_name(v)
    if isinstance(v, (torch.Size, tuple)):
        return list(v)
    return v


def _call_table(cls, entry, args, kwargs):
    op, params, path, adapt = entry
    if len(args) > len(params):
        raise TypeError(f"torch.{path}: {len(args)} positional arguments; Samba maps at most {len(params)}")
    bound = dict(zip((p[0] for p in params), args))
    names = {p[0] for p in params}
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"torch.{path}: argument '{k}' is not supported by Samba's {op}")
        bound[k] = v
    if adapt:
        bound = adapt(bound)
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
                tensors[op_name] = [cls._coerce(t) for t in v]
            else:
                tensors[op_name] = None if v is None else cls._coerce(v)
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
    return cls._call_op(op, ordered, attrs)


def dispatch(cls, func, args, kwargs):
    """SambaTensor.__torch_function__: the Samba op for a torch function, on tensor class `cls`."""
    entry = _table().get(func)
    if entry is not None:
        return _call_table(cls, entry, args, kwargs)
    name = getattr(func, "__name__", "")
    if name in _REVERSED and len(args) == 2:
        return cls._coerce(args[1])._op(_REVERSED[name], args[0])
    if name in _DUNDER:
        return cls._coerce(args[0])._op(_DUNDER[name], *args[1:])
    if name in _METHODS and args:
        return getattr(cls._coerce(args[0]), name)(*args[1:], **kwargs)
    if name in _COMPOSED:
        return getattr(functional, name)(*args, **kwargs)
    if name == "split":
        return cls._coerce(args[0]).split(*args[1:], **kwargs)
    if not is_op(name):
        raise SambaError("SAMBA_ERR_UNSUPPORTED",
                         f"torch function {getattr(func, '__module__', '') or 'torch'}.{name} has no Samba op; "
                         f"supported: {sorted(e[2] for e in _table().values())} and the registry ops")
    return cls._call_bound(name, args, kwargs)
