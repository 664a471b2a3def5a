"""samba.utils: the SambaFlow helpers over the default session."""
from ..session import session


def trace_graph(model, inputs, optims=None, pef="model.pef", init_output_grads=True, transfer_device=True,
                **kwargs):
    return session.trace_graph(model, inputs, optims, pef_path=pef, init_output_grads=init_output_grads,
                               transfer_device=transfer_device, **kwargs)


def trace_multigraph(*_args, **_kwargs):
    from .._lib import SambaError
    raise SambaError("SAMBA_ERR_UNSUPPORTED", "trace_multigraph is not available in the Python binding yet; "
                     "use the C function samba_session_trace_multigraph")


def init_output_grads(unspecified=(), custom=None):
    session.init_output_grads(unspecified, custom)


def measure_performance(model=None, inputs=(), iterations=10, warmup=2, inference=False, **_kwargs):
    return session.measure_performance(list(inputs), iterations, warmup, ("FWD",) if inference else ())


def set_seed(seed):
    session.set_seed(seed)


def assert_close(actual, expected, rtol=1e-5, atol=1e-8, msg=""):
    import numpy as np
    a = np.asarray(actual.numpy() if hasattr(actual, "numpy") else actual, dtype=np.float64)
    e = np.asarray(expected.numpy() if hasattr(expected, "numpy") else expected, dtype=np.float64)
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=msg)
