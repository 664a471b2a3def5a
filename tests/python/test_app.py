"""The seed's ResFFNLogReg app (examples/python/resffn_logreg.py) end to
end: compile, train to >= 95% held-out accuracy, the same per-step losses
as the C example, the host-loss (grad_of_outputs) variant, inference and
measure-performance."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
APP = os.path.join(ROOT, "examples", "python", "resffn_logreg.py")
DATA = os.path.join(ROOT, "examples", "data", "digits.csv.gz")


def app(*argv):
    r = subprocess.run([sys.executable, APP, *argv], capture_output=True, text=True, env=os.environ.copy())
    assert r.returncode == 0, f"{argv}: {r.stdout}\n{r.stderr}"
    return r.stdout


def losses(path):
    with open(path) as f:
        return [json.loads(line) for line in f if '"loss"' in line]


@pytest.fixture(scope="module")
def pef(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("app") / "resffn.pef")
    out = app("compile", "-b", "64", "-p", path)
    assert "compiled ResFFNLogReg" in out and os.path.exists(path)
    return path


def test_trains_to_95_percent_with_the_c_examples_losses(pef, tmp_path):
    dump = str(tmp_path / "py.jsonl")
    out = app("run", "-b", "64", "-p", pef, "--data", DATA, "--min-accuracy", "0.95", "--dump-losses", dump)
    accuracy = float(out.rsplit("held-out accuracy:", 1)[1].split("%")[0])
    assert accuracy >= 95.0
    ours = losses(dump)
    assert len(ours) == 30 * (1438 // 64) and ours[-1]["loss"] < 0.05
    c_app = os.path.join(os.path.dirname(os.environ["SAMBA_LIBRARY"]), "examples", "resffn_logreg")
    if not os.path.exists(c_app):
        pytest.skip(f"the C example is not built ({c_app}); cmake --build build --target resffn_logreg")
    c_dump = str(tmp_path / "c.jsonl")
    subprocess.run([c_app, "compile", "-b", "64", "-p", str(tmp_path / "c.pef")], check=True, capture_output=True)
    subprocess.run([c_app, "run", "-b", "64", "-p", str(tmp_path / "c.pef"), "--data", DATA, "--checkpoint",
                    str(tmp_path / "c.ckpt"), "--dump", c_dump], check=True, capture_output=True)
    theirs = losses(c_dump)
    assert len(theirs) == len(ours)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        assert a["lr"] == pytest.approx(b["lr"], rel=1e-12)
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-6, abs=1e-7), f"step {step}"


def test_host_loss_pattern_matches_device_loss(pef, tmp_path):
    device, host = str(tmp_path / "d.jsonl"), str(tmp_path / "h.jsonl")
    app("run", "-b", "64", "-p", pef, "--data", DATA, "--steps", "25", "--dump-losses", device)
    app("run", "-b", "64", "-p", pef, "--data", DATA, "--steps", "25", "--host-loss", "--dump-losses", host)
    for a, b in zip(losses(device), losses(host)):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4)


def test_inference_and_measure_performance(pef, tmp_path):
    out = app("measure-performance", "-b", "64", "-p", pef, "--num-iterations", "5")
    assert "samples/s" in out
    inf = str(tmp_path / "inf.pef")
    app("compile", "-b", "64", "--inference", "-p", inf)
    assert "held-out accuracy" in app("run", "-b", "64", "--inference", "-p", inf, "--data", DATA)
    # The inference PEF has no output gradients; the driver traces it with
    # init_output_grads=False, which must not ask for any.
    assert "samples/s" in app("measure-performance", "-b", "64", "--inference", "-p", inf, "--num-iterations", "3")
