"""samba.distributed: the process's place in a data-parallel job (one
process per replica, launched by mpirun), over libsamba's samba_dist_* C
functions; docs/DISTRIBUTED.md. samba.utils re-exports get_rank,
get_world_size and is_distributed as SambaFlow apps spell them.

Under mpirun the first of these calls joins the job (Open MPI is
initialized by the library); in a plain process they describe rank 0 of 1."""
import ctypes

from ._lib import call, lib

_TIMEOUT_ENV = "SAMBA_DIST_TIMEOUT_S"


def _query(name):
    out = ctypes.c_int32()
    call(name, ctypes.byref(out))
    return out.value


def available():
    """Whether libsamba was built with MPI (data parallel needs it)."""
    return bool(_query("samba_dist_available"))


def get_rank():
    """This replica's rank in the job: 0 in a plain process."""
    return _query("samba_dist_rank")


def get_world_size():
    """How many replicas the job has: 1 in a plain process."""
    return _query("samba_dist_world_size")


def is_distributed():
    """Whether this process is one of several replicas (world size above 1)."""
    return bool(_query("samba_dist_is_distributed"))


def init(comm=None):
    """Joins the job now rather than at the first query: on MPI_COMM_WORLD, or
    on `comm`, an mpi4py communicator or the integer MPI_Comm_c2f gives, for
    an application that initialized MPI itself (it then finalizes it too)."""
    if comm is None:
        call("samba_dist_init")
        return
    fortran = comm.py2f() if hasattr(comm, "py2f") else int(comm)
    call("samba_dist_init_with_comm", ctypes.c_int64(fortran))


def set_timeout(seconds):
    """The bound on every collective (broadcast, gather, the PEF check, each
    gradient bucket): one not done after `seconds` fails with an error naming
    the ranks that did not take part. Default 60 s, or $SAMBA_DIST_TIMEOUT_S."""
    ms = int(round(float(seconds) * 1000))
    if ms <= 0:
        raise ValueError(f"set_timeout: the timeout must be positive, got {seconds} s")
    call("samba_dist_set_timeout_ms", ctypes.c_int64(ms))


def abort(reason, exit_code=1):
    """Tells every other rank that this one failed (they end their collectives
    with an error naming this rank and `reason`) and ends the job with
    `exit_code`. Returns only in a plain process, having done nothing."""
    call("samba_dist_abort", ctypes.c_int32(exit_code), str(reason).encode(errors="replace"))


def finalize():
    """Leaves the job (finalizing MPI when the library initialized it); no data-parallel run may follow."""
    call("samba_dist_finalize")


def _declare():
    # The argument types of the calls that take more than pointers, so ctypes
    # converts them even when a caller passes a plain int.
    for name, args in (("samba_dist_set_timeout_ms", [ctypes.c_int64]),
                       ("samba_dist_abort", [ctypes.c_int32, ctypes.c_char_p]),
                       ("samba_dist_init_with_comm", [ctypes.c_int64])):
        f = getattr(lib, name, None)
        if f is not None:
            f.argtypes = args
            f.restype = ctypes.c_int32


_declare()
