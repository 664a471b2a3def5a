"""samba.utils.utils: the SambaFlow helpers for tracing and running, over the
default session (also importable as samba.utils)."""
import os

from .. import distributed
from ..session import session

## This replica's rank in a data-parallel job (0 in a plain process); docs/DISTRIBUTED.md.
get_rank = distributed.get_rank
## How many replicas the data-parallel job has (1 in a plain process).
get_world_size = distributed.get_world_size
## Whether this process is one of several replicas (mpirun -np N with N > 1).
is_distributed = distributed.is_distributed


def trace_graph(model, inputs, optim=None, init_output_grads=True, loss_indices=None, pef="", mapping="section",
                data_parallel_mode="normal", transfer_device=True, unspecified_tensor_grad=(),
                customized_tensors_dict=None, **_deprecated):
    """Loads the PEF after re-tracing `model` against it, copies the traced
    tensors to the device and returns the traced outputs (model.output_tensors).
    Output gradients start as SambaSession.trace_graph says (the loss-output
    contract is SambaSession.compile's)."""
    return session.trace_graph(model, inputs, optim, pef_path=pef, init_output_grads=init_output_grads,
                               transfer_device=transfer_device, unspecified_grads=unspecified_tensor_grad,
                               custom_grads=customized_tensors_dict, data_parallel_mode=data_parallel_mode)


def trace_multigraph(graph, inputs=None, optimizers=None, init_output_grads=None, mapping="", trace_prefix=None):
    """The traced outputs of a graph added with session.add_graph (after
    session.init_multigraph_runtime); `graph` is the SambaGraph or its model."""
    return session.trace_multigraph(graph)


def init_output_grads(output_tensors=(), unspecified_tensor_grad=(), customized_tensors_dict=None,
                      is_variable_batch_size=False):
    """Sets the gradient of every loss output of the loaded PEF to ones, except
    those named in unspecified_tensor_grad (zero, set later by the app) and
    customized_tensors_dict (name -> values)."""
    session.init_output_grads(list(unspecified_tensor_grad), dict(customized_tensors_dict or {}))


def measure_performance(model=None, inputs=(), batch_size=None, inference=False, run_graph_only=True,
                        n_iterations=100, warmup=10, data_parallel=None, reduce_on_rdu=None, data_parallel_mode=None,
                        **_ignored):
    """Times whole runs of the loaded PEF (FWD only with inference) and prints
    and returns throughput and latency. Data parallel (None: as the app's
    command line says), the samples/s are the whole job's; only rank 0 prints."""
    report = session.measure_performance(inputs, n_iterations, warmup, ("FWD",) if inference else (),
                                         data_parallel=data_parallel, reduce_on_rdu=reduce_on_rdu,
                                         data_parallel_mode=data_parallel_mode)
    if report["world_size"] > 1 and get_rank() != 0:
        return report
    replicas = f" on {report['world_size']} replicas" if report["world_size"] > 1 else ""
    print(f"{'inference' if inference else 'training'}{replicas}: {report['samples_per_second']:.1f} samples/s, latency "
          f"mean {report['latency_mean_ms']:.3f} ms, p50 {report['latency_p50_ms']:.3f} ms, p99 "
          f"{report['latency_p99_ms']:.3f} ms over {report['iterations']} runs of batch {report['batch_size']}")
    return report


def measure_sections(model=None, inputs=(), batch_size=None, num_sections=None, n_iterations=100, warmup=10,
                     **_ignored):
    """Times each section of the schedule alone; prints and returns one report per section."""
    reports = session.measure_sections(inputs, n_iterations, warmup)
    if num_sections is not None:
        reports = reports[:num_sections]
    for r in reports:
        print(f"section {r['section_id']}: latency mean {r['latency_mean_ms']:.3f} ms, p50 "
              f"{r['latency_p50_ms']:.3f} ms, p99 {r['latency_p99_ms']:.3f} ms")
    return reports


def set_seed(seed):
    """Seeds the default session's random generator (samba.randn, rand, randint, ...)."""
    session.set_seed(seed)
    session.reset_random_generator()


def get_file_dir(file):
    """The directory of a source file (the seed's app_dir=utils.get_file_dir(__file__))."""
    return os.path.dirname(os.path.abspath(file))


def _values(x):
    if hasattr(x, "numpy") and not isinstance(x, (int, float)):
        try:
            return x.numpy()
        except TypeError:  # a torch tensor that requires grad
            return x.detach().numpy()
    return x


def assert_close(actual, expected, rtol=1e-5, atol=1e-8, msg=""):
    """Raises AssertionError when |actual - expected| > atol + rtol * |expected| anywhere."""
    try:
        import numpy as np  # optional: only array conversions need it, so it is imported on first use
    except ImportError:
        a, e = _flat(actual), _flat(expected)
        bad = [i for i, (x, y) in enumerate(zip(a, e)) if abs(x - y) > atol + rtol * abs(y)]
        if len(a) != len(e) or bad:
            raise AssertionError(f"{msg} values differ at {bad[:10]} (or lengths {len(a)} != {len(e)})") from None
        return
    np.testing.assert_allclose(np.asarray(_values(actual), dtype=np.float64),
                               np.asarray(_values(expected), dtype=np.float64), rtol=rtol, atol=atol, err_msg=msg)


def _flat(x):
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in _flat(item)]
    return [float(x)]
