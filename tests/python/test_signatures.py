"""What help() and inspect show of the package: the op functions generated
from the registry carry the schema's parameters and documentation (not
`(*args, **kwargs)`), the signature binds the calls the op accepts, every
public name has a docstring, and the package is marked typed (py.typed)."""
import importlib.util
import inspect
import os

import numpy as np
import pytest

import sambaflow
import sambaflow.samba as samba
import sambaflow.samba.utils.common as common
from sambaflow.samba import optim
from sambaflow.samba.functions import op_function

VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


@pytest.mark.parametrize("name", samba.op_names())
def test_op_signature_names_the_schemas_inputs_and_attributes(name):
    fn = op_function(name)  # samba.<name>, unless a hand-written function (samba.randn) has the name
    sch = samba.op_schema(name)
    sig = inspect.signature(fn)
    assert not [p for p in sig.parameters.values() if p.kind in VARIADIC], f"{name}{sig}"
    expected = [i["name"] for i in sch["inputs"]] + [a["name"] for a in sch["attrs"]]
    assert list(sig.parameters) == expected
    for attr in sch["attrs"]:
        p = sig.parameters[attr["name"]]
        assert p.kind is inspect.Parameter.KEYWORD_ONLY
        if attr["required"]:
            assert p.default is inspect.Parameter.empty, f"{name}.{attr['name']} is required"
        else:
            assert p.default == attr["default"], f"{name}.{attr['name']}"
    doc = inspect.getdoc(fn)
    assert doc.startswith(sch["signature"]) and sch["doc"] in doc


def test_op_signature_shows_defaults_and_binds_real_calls():
    assert str(inspect.signature(samba.linear)) == (
        "(x: 'SambaTensor', weight: 'SambaTensor', bias: 'SambaTensor | None' = None, *, "
        "activation: 'str' = 'none') -> 'SambaTensor'")
    # An optional input before a required one has no default: add_(x, y).
    sig = inspect.signature(samba.add_)
    assert sig.parameters["x"].default is inspect.Parameter.empty
    x = samba.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    w = samba.from_numpy(np.ones(3, np.float32))
    sig = inspect.signature(samba.layer_norm)
    with pytest.raises(TypeError):
        sig.bind(x, w)  # normalized_shape is required
    bound = sig.bind(x, w, normalized_shape=[3])
    out = samba.layer_norm(*bound.args, **bound.kwargs)
    assert out.shape == (2, 3)


def test_op_method_signature_drops_the_tensor_it_is_called_on():
    x = samba.from_numpy(np.ones((2, 3), np.float32))
    sig = inspect.signature(x.softmax)
    assert "x" not in sig.parameters and "dim" in sig.parameters
    assert x.softmax.__name__ == "softmax"
    assert samba.op_schema("softmax")["doc"] in inspect.getdoc(x.softmax)
    np.testing.assert_allclose(np.asarray(x.softmax(dim=1)), np.full((2, 3), 1 / 3, np.float32), rtol=1e-6)


def test_op_functions_are_reported_as_the_packages():
    assert samba.relu.__module__ == "sambaflow.samba"
    assert samba.relu.__qualname__ == "relu"


def _public_callables(*extra):
    out = []
    for owner, prefix in ((samba, "samba"), (common, "common"), (samba.session, "session"),
                          (samba.SambaSession, "SambaSession"), (optim.SGD, "SGD"), (optim.AdamW, "AdamW")) + extra:
        for name in dir(owner):
            value = getattr(owner, name, None)
            if name.startswith("_") or inspect.ismodule(value) or not callable(value):
                continue
            out.append((f"{prefix}.{name}", value))
    return out


def test_every_public_function_has_a_docstring():
    missing = [name for name, value in _public_callables() if not inspect.getdoc(value)]
    assert not missing, missing


def test_public_functions_other_than_ops_show_real_parameters():
    # Variadic parameters only where the function's torch or SambaFlow
    # spelling takes any number of values (samba.randn(2, 3), x.view(2, 3),
    # randint's and to()'s overloads, callbacks' arguments) or accepts
    # options it ignores.
    expected = {"einsum", "empty", "ones", "rand", "randn", "randint", "zeros", "Materializer", "parameter",
                "Optimizer", "atexit_register", "use_abexit", "compile", "compile_multigraph", "common_app_driver",
                "parse_app_args", "to", "type", "view", "reshape", "permute", "expand", "repeat", "cuda"}
    ops = set(samba.op_names())
    loose = set()
    for name, value in _public_callables((samba.SambaTensor, "SambaTensor")):
        short = name.split(".")[-1]
        try:
            sig = inspect.signature(value)
        except (TypeError, ValueError):
            continue
        if short not in ops and any(p.kind in VARIADIC for p in sig.parameters.values()):
            loose.add(short)
    assert loose <= expected, sorted(loose - expected)


def test_the_package_is_marked_typed():
    for package in (sambaflow, samba):
        assert os.path.exists(os.path.join(os.path.dirname(package.__file__), "py.typed")), package.__name__


def test_the_package_provides_no_top_level_samba_module():
    # `samba` is Debian's python3-samba (the file-sharing suite): the package
    # must neither shadow it nor depend on it.
    import_root = os.path.dirname(os.path.dirname(sambaflow.__file__))
    assert not os.path.exists(os.path.join(import_root, "samba"))
    spec = importlib.util.find_spec("samba")
    assert spec is None or not (spec.origin or "").startswith(import_root)
