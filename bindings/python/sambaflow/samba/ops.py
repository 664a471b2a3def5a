"""The registry's ops on native handles: names, schemas
(samba_op_schema_json), attributes, binding a Python call to a schema, and
calling an op in the default session (it computes on the host, or is
recorded while a model is being compiled). SambaTensor and samba.<op>
(functions.py) build on these."""
import ctypes
import inspect
import json

from . import dtypes
from ._lib import P, SambaError, c_size, call, default_session, lib, out_handle

_MAX_OUTPUTS = 64
_schemas = {}


def op_names():
    """The names of the registry's ops, in registry order (each is a samba.<name> function)."""
    names = []
    for i in range(lib.samba_op_count()):
        out = ctypes.c_char_p()
        call("samba_op_name", ctypes.c_size_t(i), ctypes.byref(out))
        names.append(out.value.decode())
    return names


def schema(name):
    """The registry's schema of op `name` as a dict: inputs, attributes (types, defaults, docs),
    outputs and the op's documentation. Raises SambaError for an unknown op."""
    if name not in _schemas:
        out = ctypes.c_char_p()
        call("samba_op_schema_json", name.encode(), ctypes.byref(out))
        _schemas[name] = json.loads(out.value.decode())
    return _schemas[name]


def attrs_handle(values, types=None):
    """A samba_attrs holding `values` (name -> value); types from the schema where known."""
    h = out_handle("samba_attrs_create")
    try:
        for name, v in values.items():
            t = (types or {}).get(name)
            key = name.encode()
            if v is None:
                continue
            if t == "dtype" or (t is None and isinstance(v, str) and v.startswith("torch.")):
                call("samba_attrs_set_dtype", h, key, ctypes.c_int32(dtypes.from_name(v)))
            elif t == "bool" or isinstance(v, bool):
                call("samba_attrs_set_bool", h, key, ctypes.c_int32(1 if v else 0))
            elif t == "ints" or (t is None and isinstance(v, (list, tuple)) and all(isinstance(x, int) for x in v)):
                vals = [v] if isinstance(v, int) else list(v)
                arr = (ctypes.c_int64 * max(1, len(vals)))(*vals)
                call("samba_attrs_set_ints", h, key, arr, ctypes.c_size_t(len(vals)))
            elif t == "floats" or isinstance(v, (list, tuple)):
                vals = [float(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
                arr = (ctypes.c_double * max(1, len(vals)))(*vals)
                call("samba_attrs_set_floats", h, key, arr, ctypes.c_size_t(len(vals)))
            elif t == "string" or isinstance(v, str):
                call("samba_attrs_set_string", h, key, str(v).encode())
            elif t == "int" or (t is None and isinstance(v, int)):
                call("samba_attrs_set_int", h, key, ctypes.c_int64(int(v)))
            else:
                call("samba_attrs_set_float", h, key, ctypes.c_double(float(v)))
    except BaseException:
        lib.samba_attrs_release(h)
        raise
    return h


def is_op(name):
    """Whether `name` is a registry op (names starting with '_' never are)."""
    if name.startswith("_"):
        return False
    try:
        schema(name)
        return True
    except SambaError:
        return False


def call_native(name, input_handles, attrs=None):
    """Runs registry op `name` on native tensor handles (None for an absent
    optional input) in the default session; returns (OWNED output handles,
    whether the op has a single output)."""
    sch = schema(name)
    types = {a["name"]: a["type"] for a in sch["attrs"]}
    ah = attrs_handle(attrs or {}, types) if attrs else None
    try:
        ins = (P * max(1, len(input_handles)))(*input_handles)
        outs = (P * _MAX_OUTPUTS)()
        n = c_size()
        call("samba_op_call", default_session.handle, name.encode(), ins, ctypes.c_size_t(len(input_handles)), ah,
             outs, ctypes.c_size_t(_MAX_OUTPUTS), ctypes.byref(n))
    finally:
        if ah:
            lib.samba_attrs_release(ah)
    single = len(sch["outputs"]) == 1 and not sch["outputs"][0].get("variadic")
    return [outs[i] for i in range(n.value)], single


def bind(name, args, kwargs):
    """Binds a Python call of op `name` to its schema: (the input values in
    order, None for absent optional ones, trailing absent ones dropped; the
    attributes by name). Inputs are positional (or by name); attributes
    follow them positionally or by keyword."""
    sch = schema(name)
    ins, attr_names = sch["inputs"], [a["name"] for a in sch["attrs"]]
    args, kwargs = list(args), dict(kwargs)
    inputs = []
    for spec in ins:
        if spec.get("variadic"):
            inputs.extend(args.pop(0) if args else kwargs.pop(spec["name"], []))
        elif args:
            inputs.append(args.pop(0))
        elif spec["name"] in kwargs:
            inputs.append(kwargs.pop(spec["name"]))
        elif spec.get("optional"):
            inputs.append(None)
        else:
            raise TypeError(f"{name}() missing input '{spec['name']}'")
    if len(args) > len(attr_names):
        raise TypeError(f"{name}() takes {len(ins)} inputs and {len(attr_names)} attributes; got more")
    values = dict(zip(attr_names, args))
    for k, v in kwargs.items():
        if k not in attr_names:
            raise TypeError(f"{name}() has no attribute '{k}'; its attributes are {attr_names}")
        values[k] = v
    while inputs and inputs[-1] is None:
        inputs.pop()
    return inputs, values


# How an attribute type of the schema reads as a Python annotation.
_ATTR_ANNOTATIONS = {"int": "int", "float": "float", "bool": "bool", "string": "str", "ints": "Sequence[int]",
                     "floats": "Sequence[float]", "dtype": "samba.dtype | str"}


def _input_annotation(spec):
    if spec.get("variadic"):
        return "Sequence[SambaTensor]"
    return "SambaTensor | None" if spec.get("optional") else "SambaTensor"


def op_signature(name, bound_first=False):
    """The inspect.Signature of samba.<name> as bind() reads a call: the
    inputs positional (a variadic one as one sequence; an optional one
    defaults to None unless a required input follows it, as in add_(x, y)),
    then the attributes by keyword with the schema's defaults (bind() also
    takes them positionally after the inputs, as the op's older spelling).
    bound_first drops the first input: the method form, x.<name>(...)."""
    sch = schema(name)
    inputs = sch["inputs"][1:] if bound_first else sch["inputs"]
    params = []
    for i, spec in enumerate(inputs):
        optional_tail = all(later.get("optional") for later in inputs[i:])
        default = None if optional_tail else inspect.Parameter.empty
        params.append(inspect.Parameter(spec["name"], inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                        annotation=_input_annotation(spec)))
    for attr in sch["attrs"]:
        default = inspect.Parameter.empty if attr.get("required") else attr.get("default")
        annotation = _ATTR_ANNOTATIONS.get(attr["type"], attr["type"])
        if attr.get("optional"):
            annotation += " | None"
        params.append(inspect.Parameter(attr["name"], inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=annotation))
    outputs = sch["outputs"]
    single = len(outputs) == 1 and not outputs[0].get("variadic")
    return inspect.Signature(params, return_annotation="SambaTensor" if single else "tuple[SambaTensor, ...]")


def _described(items, bound_first=False):
    lines = []
    for spec in items[1:] if bound_first else items:
        kind = "" if "type" not in spec else f" ({spec['type']}{', required' if spec.get('required') else ''})"
        doc = spec.get("doc")
        lines.append(f"    {spec['name']}{kind}: {doc}" if doc else f"    {spec['name']}{kind}")
    return lines


def op_doc(name, bound_first=False):
    """The docstring of samba.<name> from the registry's schema: the
    schema's signature, what the op computes, then each input, attribute
    and output with its documentation."""
    sch = schema(name)
    parts = [sch.get("signature", name), "", sch.get("doc", "")]
    for title, items, skip in (("Inputs", sch["inputs"], bound_first), ("Attributes", sch["attrs"], False),
                               ("Outputs", sch["outputs"], False)):
        described = _described(items, skip)
        if described:
            parts += ["", f"{title}:"] + described
    return "\n".join(parts)
