"""The data-parallel half of SambaSession: the defaults of run's
data_parallel arguments (set from an app's command line by
parse_app_args), broadcast and gather across the replicas, and the seed's
process-exit contract (atexit_register, use_abexit), under which a failing
replica ends the whole job instead of leaving the others waiting in a
collective. docs/DISTRIBUTED.md."""
import atexit
import ctypes
import os
import sys
import traceback

from . import distributed
from ._lib import P, call, strings
from .tensor import SambaTensor

_MODES = ("normal", "inorder", "optimal")
_TRANSFER = {"parameters": 1, "buffers": 2, "optimizer_state": 4}


def _check_mode(mode):
    if mode not in _MODES:
        raise ValueError(f"data_parallel_mode must be one of {', '.join(_MODES)}; got {mode!r}")
    return mode


def set_run_options_data_parallel(ro, resolved):
    """Writes resolved (data_parallel, reduce_on_rdu, mode) arguments, as
    _data_parallel_args gives them, to the run options `ro`."""
    dp, rdu, mode = resolved
    if dp:
        call("samba_run_options_set_data_parallel", ro, ctypes.c_int32(1), ctypes.c_int32(1 if rdu else 0),
             mode.encode())


class DataParallelSession:
    """SambaSession's data-parallel methods (mixed into SambaSession)."""

    def set_data_parallel_defaults(self, data_parallel=False, reduce_on_rdu=False, data_parallel_mode="normal"):
        """What run() uses when its data_parallel, reduce_on_rdu or
        data_parallel_mode is not given. parse_app_args sets them from
        `run --data-parallel --reduce-on-rdu --data-parallel-mode M`, so an app
        whose run() calls do not pass them trains data parallel unchanged."""
        self._dp_defaults = (bool(data_parallel), bool(reduce_on_rdu), _check_mode(data_parallel_mode))

    def _data_parallel_args(self, data_parallel, reduce_on_rdu, data_parallel_mode):
        dp, rdu, mode = getattr(self, "_dp_defaults", (False, False, "normal"))
        return (dp if data_parallel is None else bool(data_parallel), rdu if reduce_on_rdu is None else
                bool(reduce_on_rdu), _check_mode(mode if data_parallel_mode is None else data_parallel_mode))

    def _set_run_data_parallel(self, ro, data_parallel, reduce_on_rdu, data_parallel_mode):
        resolved = self._data_parallel_args(data_parallel, reduce_on_rdu, data_parallel_mode)
        set_run_options_data_parallel(ro, resolved)
        return resolved[0]

    @staticmethod
    def _set_compile_data_parallel(co, data_parallel, world_size, bucket_bytes):
        if not data_parallel:
            return
        if not world_size:
            world_size = distributed.get_world_size()
            if world_size < 2:
                raise ValueError("compile(data_parallel=True) needs world_size (-ws N on the command line): the "
                                 "number of replicas the PEF will run on")
        call("samba_compile_options_set_data_parallel", co, ctypes.c_int32(int(world_size)),
             ctypes.c_int64(int(bucket_bytes or 0)))

    def broadcast(self, what=("parameters", "buffers", "optimizer_state"), root=0):
        """Copies the device values of the `what` kinds of tensors from rank
        `root` to every replica (trace_graph does this at load). Every rank
        must call it; in a plain process it does nothing."""
        call("samba_session_broadcast", self.handle, ctypes.c_uint32(sum(_TRANSFER[w] for w in what)),
             ctypes.c_int32(root))

    def gather_tensors_by_name(self, names):
        """Every replica's device value of each named tensor, concatenated in
        rank order along dim 0, on rank 0; None for each on the other ranks.
        Every rank must call it (a plain process gets its own values)."""
        outs = (P * max(1, len(names)))()
        call("samba_session_gather_tensors_by_name", self.handle, strings(list(names)), ctypes.c_size_t(len(names)),
             outs)
        return [SambaTensor._wrap(outs[i]) if outs[i] else None for i in range(len(names))]

    # ---- process exit -------------------------------------------------------------------
    def atexit_register(self, func, *args, **kwargs):
        """An exit handler that runs once: at a normal exit (Python's atexit)
        or when use_abexit ends the process after a failure."""
        self._exit_handlers = getattr(self, "_exit_handlers", [])
        self._exit_handlers.append((func, args, kwargs))
        atexit.register(self._run_exit_handler, len(self._exit_handlers) - 1)
        return func

    def _run_exit_handler(self, index):
        handlers = getattr(self, "_exit_handlers", [])
        if index < len(handlers) and handlers[index] is not None:
            func, args, kwargs = handlers[index]
            handlers[index] = None  # once only, whichever path runs it first
            func(*args, **kwargs)

    def use_abexit(self, func, *args, **kwargs):
        """Runs func(*args, **kwargs) and returns its result. If it raises (a
        SystemExit with a non-zero code included), the traceback is printed,
        the handlers of atexit_register run, and then: in a data-parallel job
        every other replica is told this rank failed (samba_dist_abort: each
        ends its collective with an error naming this rank and the exception)
        and the job ends with status 1; in a plain process the process exits
        at once with status 1, bypassing atexit handlers that could hang."""
        try:
            return func(*args, **kwargs)
        except SystemExit as e:
            if e.code in (None, 0):
                raise
            self._abexit(f"SystemExit: {e.code}")
        except BaseException as e:  # noqa: BLE001 - the point is to exit on anything
            traceback.print_exc()
            self._abexit(f"{type(e).__name__}: {e}")

    def _abexit(self, reason):
        for i in range(len(getattr(self, "_exit_handlers", []))):
            try:
                self._run_exit_handler(i)
            except BaseException:  # noqa: BLE001 - keep going to the exit
                traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            if distributed.is_distributed():
                distributed.abort(reason, 1)  # does not return
        except BaseException:  # noqa: BLE001 - the local exit below still ends this rank
            traceback.print_exc()
        os._exit(1)
