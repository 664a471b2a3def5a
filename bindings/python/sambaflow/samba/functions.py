"""Op functions generated from the registry's schemas: samba.relu(x),
samba.linear(x, w, b), samba.layer_norm(x, w, b, normalized_shape=[64]), ...
Inputs are positional; attributes follow them positionally or by keyword,
with the schema's defaults. Each call computes on the host, or is recorded
while a model is being compiled."""
from .ops import is_op, op_doc, op_names, op_signature
from .tensor import SambaTensor

_functions = {}


def call_op(name, inputs, attrs=None):
    """Runs registry op `name` on SambaTensors (None for an absent optional input)."""
    return SambaTensor._call_op(name, inputs, attrs)


def _make(name):
    def fn(*args, **kwargs):
        return SambaTensor._call_bound(name, args, kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = __package__
    fn.__doc__ = op_doc(name)
    fn.__signature__ = op_signature(name)
    return fn


def op_function(name):
    """samba.<name>: the function of registry op `name`, or None when there is no such op."""
    if name not in _functions:
        _functions[name] = _make(name) if is_op(name) else None
    return _functions[name]


def export_all(namespace):
    """Defines every registry op as a function in `namespace` (the samba module)."""
    for n in op_names():
        if n not in namespace:
            namespace[n] = op_function(n)
