"""Data-parallel training from Python under Open MPI's mpirun (2 ranks,
oversubscribed, loopback): the seed's app unchanged, initialization made
identical by trace_graph, faults that end the job instead of hanging,
checkpoints from rank 0, the loader's shares, and bad input. Every mpirun
runs under `timeout`, so a hang fails the test instead of the suite."""
import json
import os
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
APP = os.path.join(ROOT, "examples", "python", "resffn_logreg.py")
WORKER = os.path.join(HERE, "dp_worker.py")
MPIRUN = os.environ.get("SAMBA_MPIRUN", "mpirun")
# A hang is a failure: no mpirun of these tests needs more than this.
TIMEOUT_S = 120


def mpirun_args(np_):
    args = [MPIRUN, "--oversubscribe", "--bind-to", "none", "-np", str(np_), "-x", "SAMBA_LIBRARY", "-x", "PYTHONPATH"]
    if os.geteuid() == 0:
        args.insert(1, "--allow-run-as-root")
    return args


def run(cmd, timeout=TIMEOUT_S, check=True):
    """Runs cmd under `timeout`; returns (exit status, stdout + stderr, seconds)."""
    t0 = time.monotonic()
    p = subprocess.run(["timeout", "--kill-after=10", str(timeout)] + cmd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    took = time.monotonic() - t0
    assert p.returncode != 124, f"timed out after {timeout} s (a hang):\n{p.stdout[-4000:]}"
    if check:
        assert p.returncode == 0, f"exit {p.returncode}:\n{p.stdout[-4000:]}"
    return p.returncode, p.stdout, took


def worker(*args):
    return [sys.executable, WORKER, *args]


def mpi_worker(np_, *args):
    return mpirun_args(np_) + worker(*args)


def read(out, what, ranks):
    return [json.load(open(os.path.join(out, f"{what}.rank{r}.json"))) for r in range(ranks)]


@pytest.fixture(scope="module")
def dp_pef(tmp_path_factory):
    d = tmp_path_factory.mktemp("pef")
    pef = str(d / "classifier_dp.pef")
    run(worker("compile", pef, "--data-parallel", "-ws", "2"))
    return pef


# ---- the seed's app ----------------------------------------------------------------------
def _app_losses(path):
    return [json.loads(line)["loss"] for line in open(path)]


def test_seed_app_unchanged_trains_like_one_process_at_twice_the_batch(tmp_path):
    """resffn_logreg.py, as written, under mpirun -np 2 run --data-parallel
    --reduce-on-rdu at batch 32: the two ranks' mean loss at each step is one
    process's loss at batch 64 (SambaLoader deals rank 0 the even batches and
    rank 1 the odd ones, whose union is the batch of 64; the gradients'
    mean over ranks is the batch-64 gradient). Tolerance 1e-4: the
    replicas' sums are ordered differently than one process's."""
    single, dp = str(tmp_path / "single.pef"), str(tmp_path / "dp.pef")
    run([sys.executable, APP, "compile", "-b", "64", "-p", single])
    run([sys.executable, APP, "compile", "-b", "32", "-p", dp, "--data-parallel", "-ws", "2"])
    common = ["run", "--epochs", "1", "--steps", "12"]
    run([sys.executable, APP, *common, "-b", "64", "-p", single, "--dump-losses", str(tmp_path / "ref.jsonl")])
    # MPMD: the same app on both ranks, each writing its own loss file.
    per_rank = []
    for r in range(2):
        per_rank += (["-np", "1"] if r == 0 else [":", "-np", "1"]) + [
            sys.executable, APP, *common, "-b", "32", "-p", dp, "--data-parallel", "--reduce-on-rdu",
            "--dump-losses", str(tmp_path / f"rank{r}.jsonl")]
    _, out, _ = run(mpirun_args(2)[:-2] + per_rank)
    ref = _app_losses(tmp_path / "ref.jsonl")
    r0, r1 = _app_losses(tmp_path / "rank0.jsonl"), _app_losses(tmp_path / "rank1.jsonl")
    assert len(ref) == len(r0) == len(r1) == 12
    assert r0 != r1  # each rank saw its own half of the batch
    for step, (a, b, want) in enumerate(zip(r0, r1, ref)):
        assert abs((a + b) / 2 - want) <= 1e-4, f"step {step}: ranks {a}, {b} (mean {(a + b) / 2}), one process {want}"
    assert out.count("held-out accuracy") == 2


# ---- start-up: the same model on every rank ----------------------------------------------
@pytest.mark.parametrize("lazy", [False, True], ids=["random", "lazy"])
def test_initialization_is_identical_on_every_rank_after_trace_graph(dp_pef, tmp_path, lazy):
    """Each rank draws its own initial weights (torch seeded by rank, or lazy
    parameters seeded by rank); after trace_graph every rank holds rank 0's."""
    run(mpi_worker(2, "init", dp_pef, str(tmp_path), *(["--lazy"] if lazy else [])))
    w0, w1 = read(tmp_path, "init", 2)
    assert w0.keys() == w1.keys() and w0
    for name in w0:
        assert w0[name] == w1[name], f"{name} differs between the ranks"
    # And they are rank 0's draw, not a constant: a plain process seeded as rank 0 draws the same.
    if not lazy:
        (tmp_path / "alone").mkdir()
        run(worker("init", dp_pef, str(tmp_path / "alone")))
        alone = json.load(open(tmp_path / "alone" / "init.rank0.json"))
        assert alone == w0


def test_loader_shards_by_rank_with_the_same_shuffle(dp_pef, tmp_path):
    run(mpi_worker(2, "init", dp_pef, str(tmp_path)))
    s0, s1 = read(tmp_path, "loader", 2)
    assert len(s0) == len(s1) == 5
    assert sorted(s0 + s1) == list(range(10))
    assert s0 + s1 != list(range(10)) and s0 != [0, 2, 4, 6, 8]  # shuffled, the same way on both ranks


# ---- faults end the job ------------------------------------------------------------------
def test_a_rank_that_raises_in_use_abexit_ends_the_others_naming_it(dp_pef):
    status, out, took = run(mpi_worker(2, "raise", dp_pef, "--timeout", "5"), check=False)
    assert status != 0
    assert "rank 0: training" in out, out[-3000:]
    assert "ValueError: the data of rank 1 is corrupt" in out
    assert "rank 1" in out
    assert "exit handler ran" in out
    assert took < 60, f"the job took {took:.0f} s to end"


def test_a_rank_killed_mid_step_ends_the_others(dp_pef):
    status, out, took = run(mpi_worker(2, "kill", dp_pef, "--timeout", "5"), check=False)
    assert status != 0
    assert "rank 0: training" in out and "rank 1: training" in out, out[-3000:]
    assert "rank 1" in out, out[-3000:]
    assert took < 60, f"the job took {took:.0f} s to end"


# ---- checkpoints ---------------------------------------------------------------------------
def test_checkpoint_from_rank_0_loads_in_a_single_process_and_outputs_gather_to_rank_0(dp_pef, tmp_path):
    ckpt = str(tmp_path / "dp.ckpt")
    run(mpi_worker(2, "train", dp_pef, str(tmp_path), "--checkpoint", ckpt))
    t0, t1 = read(tmp_path, "train", 2)
    assert t0["weights"] == t1["weights"]  # the replicas stayed identical
    assert t0["losses"] != t1["losses"]  # on different data
    # get_tensors(gather=True): rank 0 gets both ranks' logits in rank order, rank 1 None.
    assert t1["gathered_logits"] is None
    assert t0["gathered_logits"] == t0["own_logits"] + t1["own_logits"]
    assert t0["own_logits"] != t1["own_logits"]
    # measure_performance(data_parallel=True) reports the job: the global batch, both ranks' samples.
    perf = t0["perf"]
    assert perf["world_size"] == 2 and perf["batch_size"] == 8
    # samples/s is the global batch over the slowest rank's total time, which is
    # at least this rank's summed step latencies: a bound that holds at any load
    # (the ratio itself depends on how the ranks' timed loops line up).
    assert 0 < perf["samples_per_second"] <= 8 * 1000 / perf["latency_mean_ms"] * (1 + 1e-9)
    plain = str(tmp_path / "plain.pef")
    run(worker("compile", plain))
    run(worker("infer", plain, str(tmp_path), "--checkpoint", ckpt))
    inf = json.load(open(tmp_path / "infer.rank0.json"))
    assert inf["weights"] == t0["weights"]
    assert inf["logits"] == pytest.approx(t0["logits"], abs=1e-6)


# ---- bad input: an error, never a hang -----------------------------------------------------
def test_a_pef_compiled_without_data_parallel_is_refused(tmp_path):
    plain = str(tmp_path / "plain.pef")
    run(worker("compile", plain))
    status, out, _ = run(mpi_worker(2, "step", plain), check=False)
    assert status != 0
    assert "data parallel" in out.lower() and "recompile" in out.lower(), out[-3000:]


def test_a_world_size_other_than_the_pefs_is_refused(tmp_path):
    pef = str(tmp_path / "ws3.pef")
    run(worker("compile", pef, "--data-parallel", "-ws", "3"))
    status, out, _ = run(mpi_worker(2, "step", pef), check=False)
    assert status != 0
    assert "compiled for 3 data-parallel replicas; the job has 2 ranks" in out, out[-3000:]


def test_compile_data_parallel_needs_a_world_size(tmp_path):
    status, out, _ = run(worker("compile", str(tmp_path / "x.pef"), "--data-parallel"), check=False)
    assert status != 0 and "world_size" in out
