"""__torch_function__ dispatch: unmodified torch.nn modules and
torch.nn.functional calls on SambaTensors run Samba ops (traced while
compiling, computed otherwise). It works on the tensor class SambaTensor
passes in, so it needs nothing above the op layer.

Which torch function becomes which registry op is data: _TABLE below lists,
per torch function, the registry op and torch's parameters in order, with
how each maps to the op (same name, renamed, or dropped when it has the
value that needs nothing). route() says how every other torch function runs:
operators, aliases, SambaTensor's methods, samba.functional's compositions,
torch's own Python bodies, registry ops of the same name and torch._decomp
decompositions (docs/torch_frontend.md)."""
from ._lib import SambaError
from . import dtypes, functional
from .ops import bind, is_op, schema
from .torch_fallback import decomposition_module, python_composite, qualified_name, run_fallback

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
    ("nn.functional.relu", "relu", "input:x inplace=*"),
    ("relu", "relu", "input:x"),
    ("nn.functional.gelu", "gelu", "input:x approximate"),
    ("tanh", "tanh", "input:x"),
    ("sigmoid", "sigmoid", "input:x"),
    ("nn.functional.tanh", "tanh", "input:x"),
    ("nn.functional.sigmoid", "sigmoid", "input:x"),
    ("nn.functional.softmax", "softmax", "input:x dim _stacklevel=* dtype=None"),
    ("nn.functional.log_softmax", "log_softmax", "input:x dim _stacklevel=* dtype=None"),
    ("softmax", "softmax", "input:x dim dtype=None"),
    ("nn.functional.dropout", "dropout", "input:x p training inplace=*"),
    ("nn.functional.embedding", "embedding",
     "input:indices weight padding_idx max_norm=None norm_type=2.0 scale_grad_by_freq=False sparse=False"),
    ("nn.functional.max_pool2d", "max_pool2d",
     "input:x kernel_size stride padding dilation ceil_mode return_indices=False"),
    # max_pool2d(..., return_indices=True) and nn.MaxPool2d(return_indices=True)
    # reach torch through this one, which returns (values, indices) whatever
    # return_indices says.
    ("nn.functional.max_pool2d_with_indices", "max_pool2d_with_indices",
     "input:x kernel_size stride padding dilation ceil_mode return_indices=*"),
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
    ("nn.functional.silu", "silu", "input:x inplace=*"),
    ("nn.functional.leaky_relu", "leaky_relu", "input:x negative_slope inplace=*"),
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

# torch's other names of registry ops.
_ALIASES = {"true_divide": "div", "divide": "div", "multiply": "mul", "subtract": "sub", "negative": "neg",
            "absolute": "abs", "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le",
            "not_equal": "ne", "clip": "clamp", "concat": "cat", "concatenate": "cat"}

# Torch functions that samba.functional composes from registry ops (fused
# attention): ahead of torch's own Python bodies of the same functions.
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
_methods = {}
_routes = {}


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


def table_function(name):
    """torch.<name> when the mapping table maps it (so x.<name>(...) takes the same route), else None."""
    func = getattr(torch_module(), name, None)
    return func if func is not None and func in _table() else None


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
    result = cls._call_op(op, ordered, attrs)
    if bound.get("inplace"):  # torch's inplace=True (nn.ReLU(inplace=True)): the input holds the result
        return cls._coerce(bound[params[0][0]]).write_result(result, f"torch.{path}")
    return result


def broadcast_shape(*shapes):
    """torch.broadcast_shapes: trailing dims match or are 1."""
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0} - {1}
        if len(dims) > 1:
            raise ValueError(f"broadcast_tensors: shapes {[tuple(s) for s in shapes]} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return out


def broadcast_tensors(coerce, *tensors):
    """`tensors` (each converted with `coerce`) expanded to their common broadcast shape (torch.broadcast_tensors)."""
    tensors = [coerce(t) for t in tensors]
    shape = broadcast_shape(*(t.shape for t in tensors))
    return tuple(t.expand(shape) for t in tensors)


def _method_names(cls):
    """SambaTensor's own methods (views, dtype conversions, max/min, split, expand, ...):
    torch.<name>(x, ...) calls x.<name>(...) so function and method agree."""
    names = _methods.get(cls)
    if names is None:
        names = _methods[cls] = {n for k in cls.__mro__ for n, v in vars(k).items()
                                 if callable(v) and not n.startswith("_")}
    return names


def _op_name(torch, func):
    if isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        packet = func.overloadpacket if isinstance(func, torch._ops.OpOverload) else func
        return packet.__name__
    return getattr(func, "__name__", "")


_REDUCTIONS = ("none", "mean", "sum")  # torch's reduction enum (torch._C._nn takes the int)


def _call_registry(cls, name, args, kwargs):
    """Registry op `name` called as torch calls it (positionally, torch's ints for enums)."""
    inputs, attrs = bind(name, args, kwargs)
    if isinstance(attrs.get("reduction"), int):
        attrs["reduction"] = _REDUCTIONS[attrs["reduction"]]
    return cls._call_op(name, [None if v is None else cls._coerce(v) for v in inputs], attrs)


def route(cls, func, tensor_first=True):
    """(route, target): how dispatch runs torch function `func` on tensor class
    `cls`, in order: 'table' (the mapping table's op), 'operator', 'alias'
    (another name of a registry op), 'front end' (computed here), 'method'
    (SambaTensor's own, when the first argument is a tensor), 'composite'
    (torch's Python body), 'op' (the registry op of the same name),
    'decomposition' (torch._decomp's, with the module it comes from), or
    'unsupported'. docs/torch_ops.md is generated from it."""
    key = (cls, func, tensor_first)
    if key not in _routes:
        _routes[key] = _find_route(cls, func, tensor_first)
    return _routes[key]


def _find_route(cls, func, tensor_first):
    entry = _table().get(func)
    if entry is not None:
        return "table", entry[0]
    torch = torch_module()
    name = _op_name(torch, func)
    if name in _REVERSED or name in _DUNDER:
        return "operator", _REVERSED.get(name) or _DUNDER[name]
    if name in _ALIASES:
        return "alias", _ALIASES[name]
    if name == "broadcast_tensors":
        return "front end", name
    if name in _COMPOSED:
        return "composed", name
    if tensor_first and name in _method_names(cls):
        return "method", name
    if python_composite(func) is not None:
        return "composite", qualified_name(func)
    if is_op(name):
        return "op", name
    module = decomposition_module(torch, func)
    if module is not None:
        return "decomposition", module
    return "unsupported", None


def dispatch(cls, func, args, kwargs):
    """SambaTensor.__torch_function__: the Samba op for a torch function, on tensor class `cls`
    (route() says which way), else a SambaError naming the call."""
    kind, target = route(cls, func, tensor_first=bool(args) and hasattr(args[0], "shape"))
    torch = torch_module()
    if kind == "table":
        return _call_table(cls, _table()[func], args, kwargs)
    if kind == "operator":
        if _op_name(torch, func) in _REVERSED:
            return cls._coerce(args[1])._op(target, args[0])
        return cls._coerce(args[0])._op(target, *args[1:])
    if kind == "alias":
        return cls._call_bound(target, args, kwargs)
    if kind == "front end":
        return broadcast_tensors(cls._coerce, *args)
    if kind == "composed":
        return getattr(functional, target)(*args, **kwargs)
    if kind == "method":
        return getattr(cls._coerce(args[0]), target)(*args[1:], **kwargs)
    if kind == "composite":
        return run_fallback(torch, func, args, kwargs, python_composite(func))
    if kind == "op":
        return _call_registry(cls, target, args, kwargs)
    return run_fallback(torch, func, args, kwargs)
