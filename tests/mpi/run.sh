#!/usr/bin/env bash
# Runs the data-parallel tests (tests/mpi/test_data_parallel.py) against a
# built libsamba.so with Open MPI's mpirun. Usage: run.sh LIBSAMBA_PATH
# MPIRUN [pytest args]. The interpreter is /usr/bin/python3 (torch, numpy,
# pytest); exit 77 (skipped) when it or mpirun is missing.
set -euo pipefail
lib=$(realpath "$1")
mpirun=$2
shift 2
root="$(cd "$(dirname "$0")/../.." && pwd)"
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
if ! "$py" -c "import pytest, numpy, torch" 2>/dev/null; then
  echo "skipped: $py has no pytest, numpy or torch"
  exit 77
fi
if ! command -v "$mpirun" > /dev/null; then
  echo "skipped: no mpirun at $mpirun (make setup installs openmpi-bin)"
  exit 77
fi
export SAMBA_LIBRARY="$lib" SAMBA_MPIRUN="$mpirun" PYTHONPATH="$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
# Loopback only, as CI runs it; no warnings about unused fabrics.
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
cd "$(mktemp -d)"
exec "$py" -m pytest -q -p no:cacheprovider "$root/tests/mpi/test_data_parallel.py" "$@"
