"""Op functions generated from the registry's schemas (samba_op_schema_json):
samba.relu(x), samba.linear(x, w, b), samba.layer_norm(x, w, b,
normalized_shape=[64]), ... Inputs are positional; attributes follow them
positionally or by keyword, with the schema's defaults. Each call computes on
the host, or is recorded while a model is being compiled."""
import ctypes
import json

from . import dtypes
from ._lib import P, c_size, call, lib, out_handle

_MAX_OUTPUTS = 64
_schemas = {}
_functions = {}


def op_names():
    names = []
    for i in range(lib.samba_op_count()):
        out = ctypes.c_char_p()
        call("samba_op_name", ctypes.c_size_t(i), ctypes.byref(out))
        names.append(out.value.decode())
    return names


def schema(name):
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


def call_op(name, inputs, attrs=None):
    """Runs registry op `name` on SambaTensors (None for an absent optional input)."""
    from .session import session
    from .tensor import SambaTensor
    sch = schema(name)
    types = {a["name"]: a["type"] for a in sch["attrs"]}
    ah = attrs_handle(attrs or {}, types) if attrs else None
    try:
        ins = (P * max(1, len(inputs)))(*[t.handle if t is not None else None for t in inputs])
        outs = (P * _MAX_OUTPUTS)()
        n = c_size()
        call("samba_op_call", session.handle, name.encode(), ins, ctypes.c_size_t(len(inputs)), ah, outs,
             ctypes.c_size_t(_MAX_OUTPUTS), ctypes.byref(n))
    finally:
        if ah:
            lib.samba_attrs_release(ah)
    results = [SambaTensor._wrap(outs[i]) for i in range(n.value)]
    return results[0] if len(sch["outputs"]) == 1 and not sch["outputs"][0].get("variadic") else tuple(results)


def _make(name):
    from .tensor import as_tensor
    sch = schema(name)
    ins, attrs = sch["inputs"], sch["attrs"]
    attr_names = [a["name"] for a in attrs]

    def fn(*args, **kwargs):
        args = list(args)
        tensors = []
        for spec in ins:
            if spec.get("variadic"):
                seq = args.pop(0) if args else kwargs.pop(spec["name"], [])
                tensors.extend(as_tensor(t) for t in seq)
            elif args:
                a = args.pop(0)
                tensors.append(None if a is None else as_tensor(a))
            elif spec["name"] in kwargs:
                a = kwargs.pop(spec["name"])
                tensors.append(None if a is None else as_tensor(a))
            elif spec.get("optional"):
                tensors.append(None)
            else:
                raise TypeError(f"{name}() missing input '{spec['name']}'")
        values = dict(zip(attr_names, args))
        if len(args) > len(attr_names):
            raise TypeError(f"{name}() takes {len(ins)} inputs and {len(attr_names)} attributes; got more")
        for k, v in kwargs.items():
            if k not in attr_names:
                raise TypeError(f"{name}() has no attribute '{k}'; its attributes are {attr_names}")
            values[k] = v
        while tensors and tensors[-1] is None:
            tensors.pop()
        return call_op(name, tensors, values)

    fn.__name__ = name
    sig = ", ".join([i["name"] for i in ins] + [f"{a['name']}={a.get('default')!r}" for a in attrs])
    fn.__doc__ = f"{name}({sig})\n\n{sch.get('doc', '')}"
    return fn


def op_function(name):
    if name.startswith("_"):
        return None
    if name not in _functions:
        try:
            _functions[name] = _make(name)
        except Exception:  # noqa: BLE001 - not an op
            _functions[name] = None
    return _functions[name]


def export_all(namespace):
    """Defines every registry op as a function in `namespace` (the samba module)."""
    for n in op_names():
        if n not in namespace:
            namespace[n] = op_function(n)
