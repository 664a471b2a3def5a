"""The long tail of torch: what __torch_function__ does with a torch function
that neither the mapping table nor the registry names (docs/torch_frontend.md).

  1. torch's own Python composites (torch.nn.functional.normalize,
     multi_head_attention_forward, Tensor.split, ...) run their body on
     SambaTensors with the __torch_function__ check turned off, so every torch
     call inside comes back through the dispatch as a smaller function;
  2. a C++ function or ATen operator with a decomposition in torch._decomp
     (torch 1.13: ~290 operators, e.g. hardswish, addcmul, elu, softplus) runs
     that decomposition, whose aten.* calls come back the same way;
  3. anything else is one SambaError naming the torch function, its
     arguments' shapes and dtypes, and the line of the user's model that
     called it."""
import inspect
import os
import sys
import threading
import types

from ._lib import SambaError

_HAS_TORCH_FUNCTION = ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic")
_composites = {}
_active = threading.local()
_SAMBA_DIR = os.path.dirname(os.path.abspath(__file__))
_STDLIB_DIR = os.path.dirname(os.__file__)


def _never(*_args):
    return False


def python_composite(func):
    """A copy of torch Python function `func` whose __torch_function__ checks say
    no, so its body runs on SambaTensors; None when `func` is not one."""
    if func in _composites:
        return _composites[func]
    copy = None
    code = getattr(func, "__code__", None)
    if isinstance(func, types.FunctionType) and (func.__module__ or "").startswith("torch") and \
            any(n in code.co_names for n in _HAS_TORCH_FUNCTION):
        scope = dict(func.__globals__)
        scope.update({n: _never for n in _HAS_TORCH_FUNCTION})
        copy = types.FunctionType(code, scope, func.__name__, func.__defaults__, func.__closure__)
        copy.__kwdefaults__ = func.__kwdefaults__
    _composites[func] = copy
    return copy


def aten_overloads(torch, func):
    """The ATen overloads a torch function or operator may be: itself for an
    OpOverload, else those of the aten operator of the same name."""
    if isinstance(func, torch._ops.OpOverload):
        return [func]
    packet = func if isinstance(func, torch._ops.OpOverloadPacket) else None
    if packet is None:
        try:
            packet = getattr(torch.ops.aten, getattr(func, "__name__", ""))
        except (AttributeError, RuntimeError):
            return []
    return [getattr(packet, name) for name in packet.overloads()]


def _is_tensor(torch, value):
    return hasattr(value, "samba_dtype") or isinstance(value, torch.Tensor)


def _binds(torch, schema, args, kwargs):
    """Whether (args, kwargs) fit ATen `schema`: tensors where it takes tensors only."""
    params = list(schema.arguments)
    positional = [p for p in params if not p.kwarg_only]
    if len(args) > len(positional):
        return False
    given = {p.name: a for p, a in zip(positional, args)}
    for k, v in kwargs.items():
        if not any(p.name == k for p in params):
            return False
        given[k] = v
    for p in params:
        if p.name not in given:
            if not p.has_default_value():
                return False
            continue
        wants_tensor = str(p.type).replace("Optional[", "").startswith("Tensor")
        value = given[p.name]
        if value is not None and wants_tensor != _is_tensor(torch, value) and not str(p.type).startswith("List"):
            return False
    return True


def decomposition(torch, func, args, kwargs):
    """torch._decomp's decomposition of an ATen overload of `func` that these arguments fit, or None."""
    from torch._decomp import decomposition_table  # noqa: PLC0415 - torch is loaded by now; this part is heavy
    for overload in aten_overloads(torch, func):
        fn = decomposition_table.get(overload)
        if fn is not None and _binds(torch, overload._schema, args, kwargs):
            # The wrappers compute type promotion with isinstance(x, torch.Tensor),
            # which a SambaTensor is not; Samba's ops promote by themselves.
            return inspect.unwrap(fn)
    return None


def decomposition_module(torch, func):
    """The module of torch._decomp's decomposition of any overload of `func`
    ('torch._decomp.decompositions', 'torch._refs', ...), or None."""
    from torch._decomp import decomposition_table  # noqa: PLC0415 - torch is loaded by now; this part is heavy
    for overload in aten_overloads(torch, func):
        fn = decomposition_table.get(overload)
        if fn is not None:
            return inspect.unwrap(fn).__module__
    return None


def run_fallback(torch, func, args, kwargs, fn=None):
    """Runs `func` through `fn`, else its Python composite or ATen decomposition;
    raises the unsupported-function SambaError when it has neither."""
    fn = fn or python_composite(func) or decomposition(torch, func, args, kwargs)
    if fn is None:
        raise unsupported(func, args, kwargs)
    stack = getattr(_active, "stack", None)
    if stack is None:
        stack = _active.stack = []
    stack.append(qualified_name(func))
    try:
        return fn(*args, **kwargs)
    except (AssertionError, ValueError, TypeError) as e:
        # torch._refs' decompositions assert that operands are torch.Tensors:
        # that is "no decomposition Samba can run", not the user's mistake.
        if _raised_in_torch_refs(e):
            stack.pop()
            stack.append(None)  # the error is about this function, not inside it
            raise unsupported(func, args, kwargs) from e
        raise
    finally:
        stack.pop()


def _raised_in_torch_refs(error):
    tb = error.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "")
    return module.startswith(("torch._refs", "torch._prims", "torch._decomp"))


def qualified_name(func):
    """The qualified name of torch function `func`, e.g. "torch.nn.functional.gelu" or an aten overload's name."""
    name = getattr(func, "__name__", None) or str(func)
    module = getattr(func, "__module__", None) or ""
    if type(func).__name__ in ("OpOverload", "OpOverloadPacket"):
        return f"torch.ops.{func}"
    if module in ("torch", "torch._C._nn", "torch._C._VariableFunctions", "torch._C._linalg", "torch._C._fft",
                  "torch._C._special") or not module:
        return f"torch.{name}"
    if module.startswith("torch.") and module.endswith("functional"):
        return f"torch.nn.functional.{name}" if "nn" in module else f"torch.{name}"
    owner = getattr(func, "__qualname__", name)
    return f"{module}.{owner}" if module.startswith("torch") else f"torch.{owner}"


def describe(value):
    """An argument as the error shows it: shape and dtype for tensors."""
    if hasattr(value, "samba_dtype"):
        return f"SambaTensor{list(value.shape)} {value.samba_dtype.name}"
    if type(value).__name__ in ("Tensor", "Parameter"):
        return f"torch.Tensor{list(value.shape)} {str(value.dtype).replace('torch.', '')}"
    if isinstance(value, (list, tuple)) and any(hasattr(v, "shape") for v in value):
        return "[" + ", ".join(describe(v) for v in value) + "]"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def caller():
    """'file:line' of the innermost frame outside torch, Samba and the standard library."""
    torch_dir = os.path.dirname(os.path.abspath(sys.modules["torch"].__file__))
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith((torch_dir, _SAMBA_DIR, _STDLIB_DIR)) and not path.startswith("<"):
            return f"{path}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


def unsupported(func, args, kwargs):
    """The error for a torch function Samba cannot run."""
    parts = [describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in kwargs.items()]
    inside = [f for f in getattr(_active, "stack", ()) if f]
    within = f" (inside {' -> '.join(inside)})" if inside else ""
    return SambaError("SAMBA_ERR_UNSUPPORTED",
                      f"{qualified_name(func)}({', '.join(parts)}) called at {caller()}{within} has no Samba op and "
                      f"no decomposition into Samba ops; docs/torch_ops.md lists what is covered")
