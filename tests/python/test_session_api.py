"""SambaSession and samba.utils over a compiled classifier: getters,
hyperparameter persistence, evaluation mode, sn_data / sn_grad / cpu / rdu,
transfers, init_output_grads, profiles, measurements, multigraph, the app
driver's command line, exit handling, and SambaLoader."""
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import sambaflow.samba as samba
import sambaflow.samba.utils as utils
from sambaflow.samba import SambaError
from sambaflow.samba.utils.common import common_app_driver, parse_app_args


class Net:
    def __init__(self, prefix, p=0.0):
        self.w = samba.parameter(prefix + ".weight", (3, 4))
        self.b = samba.parameter(prefix + ".bias", (3,), materializer="zeros")
        self.p = p

    def parameters(self):
        return [self.w, self.b]

    def __call__(self, x, y):
        logits = samba.linear(x, self.w, self.b)
        if self.p:
            logits = samba.dropout(logits, p=self.p)
        return samba.cross_entropy(logits, y), logits


def data(n=12, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0).astype(np.int64)
    return samba.from_numpy(x, name="x"), samba.from_numpy(y, name="y")


@pytest.fixture()
def trained(tmp_path):
    model = Net("s")
    x, y = data()
    opt = samba.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    pef = samba.session.compile(model, (x, y), opt, name="s", pef_path=str(tmp_path / "s.pef"))
    outs = utils.trace_graph(model, (x, y), opt, pef=pef)
    return model, x, y, outs, pef


def test_getters_and_names(trained):
    model, x, y, outs, pef = trained
    s = samba.session
    assert s.get_section_types() == ["FWD", "BCKWD", "OPT"]
    assert set(s.get_weight_names()) == {"s.weight", "s.bias"}
    assert {"lr", "momentum"} <= set(s.get_argin_names())
    assert s.get_dropout_rate_argin_names() == [] and s.get_dropout_seed_argin_names() == []
    assert s.get_samba_tensor_by_name("s.weight").data_ptr() == model.w.data_ptr()
    [w] = s.get_tensors_by_name(["s.weight"])
    np.testing.assert_array_equal(w.numpy(), model.w.numpy())
    [w2] = s.get_tensors([model.w])
    np.testing.assert_array_equal(w2.numpy(), w.numpy())
    with pytest.raises(SambaError) as e:
        s.get_tensors_by_name(["nope"])
    assert e.value.status == "SAMBA_ERR_NOT_FOUND" and "nope" in e.value.message
    assert not s.tracing and not s.use_static_functional()


def test_run_fwd_only_hyperparams_persist_and_section_ids(trained):
    model, x, y, outs, pef = trained
    s = samba.session
    w0 = model.w.sn_data.numpy().copy()
    loss0, logits = s.run(input_tensors=[x, y], output_tensors=outs, section_types=["FWD"])
    np.testing.assert_array_equal(model.w.sn_data.numpy(), w0)
    want = samba.cross_entropy(samba.linear(x, model.w, model.b), y).item()
    assert loss0.item() == pytest.approx(want, rel=1e-6)
    s.run([x, y], outs, hyperparam_dict={"lr": 0.0, "momentum": 0.0})
    w1 = model.w.sn_data.numpy().copy()
    s.run([x, y], outs)  # lr = 0 persists: nothing moves
    np.testing.assert_array_equal(model.w.sn_data.numpy(), w1)
    s.run([x, y], outs, hyperparam_dict={"lr": 0.5})
    assert not np.array_equal(model.w.sn_data.numpy(), w1)
    s.run([x, y], outs, section_ids=[0])
    s.run([x, y], outs, run_from_call_id=0, run_until_call_id=1)
    with pytest.raises(SambaError, match="section"):
        s.run([x, y], outs, section_types=["FWD"], section_ids=[0])
    with pytest.raises(SambaError) as e:
        s.run([x, y], outs, hyperparam_dict={"bogus": 1.0})
    assert e.value.status == "SAMBA_ERR_NOT_FOUND"
    # A PEF compiled without data parallel is refused, saying to recompile (docs/DISTRIBUTED.md).
    with pytest.raises(SambaError, match="recompile with --data-parallel") as e:
        s.run([x, y], outs, data_parallel=True)
    assert e.value.status == "SAMBA_ERR_INVALID_ARGUMENT"
    with pytest.raises(ValueError, match="data_parallel_mode must be one of"):
        s.run([x, y], outs, data_parallel=True, data_parallel_mode="fastest")


def test_training_grad_of_outputs_and_device_access(trained):
    model, x, y, outs, pef = trained
    s = samba.session
    first = s.run([x, y], outs)[0].item()
    for _ in range(30):
        last = s.run([x, y], outs)[0].item()
    assert last < 0.5 * first
    # The loss's own gradient (ones) alone equals a host-fed logits gradient of zero.
    g = np.full((12, 3), 1.0 / 12, dtype=np.float32)
    s.run([x, y], outs, section_types=["FWD", "BCKWD"],
          grad_of_outputs=[samba.zeros(()), samba.from_numpy(g)])
    gw = model.w.sn_grad.numpy()
    x_np = x.numpy()
    np.testing.assert_allclose(gw, g.T @ x_np, rtol=1e-5, atol=1e-6)
    model.w.sn_data = np.zeros((3, 4), dtype=np.float32)
    model.w.cpu()
    assert not model.w.numpy().any() and model.w.grad is not None
    model.w.data = np.ones((3, 4), dtype=np.float32)
    model.w.rdu()
    np.testing.assert_array_equal(model.w.sn_data.numpy(), np.ones((3, 4)))
    model.w.sn_grad = np.full((3, 4), 2.0, dtype=np.float32)
    assert model.w.sn_grad.numpy()[0, 0] == 2.0
    s.to_rdu(model)
    s.to_cpu(model, [None])
    s.to_cpu_(model)
    s.sync_buffers_to_cpu(model)
    s.sync_buffers_to_rdu(model)
    s.to_device()
    s.update_tensor("extra", samba.ones(2))
    assert s.get_samba_tensor_by_name("extra").shape == (2,)
    s.update_tensor("extra", None)
    with pytest.raises(SambaError):
        s.get_samba_tensor_by_name("extra")
    utils.init_output_grads(outs, unspecified_tensor_grad=[outs[1].sn_name])
    utils.init_output_grads(outs, customized_tensors_dict={outs[0].sn_name: np.array(2.0, dtype=np.float32)})
    with pytest.raises(SambaError, match="no output named"):
        utils.init_output_grads(outs, unspecified_tensor_grad=["nope"])


@pytest.fixture()
def with_dropout(tmp_path):
    """A classifier with dropout p = 0.5 and SGD, compiled and traced."""
    model = Net("d", p=0.5)
    x, y = data()
    opt = samba.optim.SGD(model.parameters(), lr=0.1)
    pef = samba.session.compile(model, (x, y), opt, name="d", pef_path=str(tmp_path / "d.pef"))
    outs = utils.trace_graph(model, (x, y), opt, pef=pef)
    return model, x, y, outs


def test_eval_mode_turns_dropout_off(with_dropout):
    model, x, y, outs = with_dropout
    assert samba.session.get_dropout_rate_argin_names()
    _, a = samba.session.run([x, y], outs, section_types=["FWD"], train=False)
    want = samba.linear(x, model.w, model.b).numpy()
    np.testing.assert_allclose(a.numpy(), want, rtol=1e-6)
    _, b = samba.session.run([x, y], outs, section_types=["FWD"], train=True)
    assert (b.numpy() == 0).sum() > 0


def test_repeated_selections_keep_their_own_options(with_dropout):
    # run() reuses the options of a selection it has seen: each selection and
    # train flag must still get its own, however the runs alternate.
    model, x, y, outs = with_dropout
    want = samba.linear(x, model.w, model.b).numpy()
    for _ in range(3):
        _, a = samba.session.run([x, y], outs, section_types=["FWD"], train=False)
        np.testing.assert_allclose(a.numpy(), want, rtol=1e-6)
        _, b = samba.session.run([x, y], outs, section_types=["FWD"], train=True)
        assert (b.numpy() == 0).sum() > 0
    w0 = model.w.sn_data.numpy().copy()
    samba.session.run([x, y], outs, section_types=["FWD"], train=False)
    np.testing.assert_array_equal(model.w.sn_data.numpy(), w0)  # FWD alone does not step
    samba.session.run([x, y], outs, train=False)
    assert not np.array_equal(model.w.sn_data.numpy(), w0)  # the whole schedule does


def test_inference_from_many_threads_matches_one(trained):
    model, x, y, outs, pef = trained
    s = samba.session
    want = s.run([x, y], outs, section_types=["FWD"])[1].numpy()
    got, errors = [], []

    def infer():
        try:
            for _ in range(50):
                got.append(s.run([x, y], outs, section_types=["FWD"])[1].numpy())
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=infer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(got) == 200
    for g in got:
        np.testing.assert_array_equal(g, want)


def test_run_arguments_are_refused_as_eager_ones_are(with_dropout):
    model, x, y, outs = with_dropout
    [rate] = samba.session.get_dropout_rate_argin_names()
    [seed] = samba.session.get_dropout_seed_argin_names()
    [w0] = samba.session.get_tensors_by_name(["d.weight"])
    nan = float("nan")
    for name, value, words in [("lr", nan, "argin 'lr' must be >= 0, got nan"),
                               ("lr", float("inf"), "argin 'lr' must be >= 0"),
                               ("weight_decay", -1.0, "argin 'weight_decay' must be >= 0"),
                               (rate, 5.0, "must be in [0, 1], got 5"),
                               (rate, nan, "must be in [0, 1], got nan"),
                               (seed, 1e300, "must be an integer in [-2^63, 2^63), got 1e+300"),
                               (seed, 0.5, "must be an integer")]:
        with pytest.raises(SambaError) as e:
            samba.session.run([x, y], outs, hyperparam_dict={name: value})
        assert e.value.status == "SAMBA_ERR_INVALID_ARGUMENT" and words in e.value.message, (name, value)
    # Nothing ran: the weights are the compiled ones.
    [w1] = samba.session.get_tensors_by_name(["d.weight"])
    np.testing.assert_array_equal(w1.numpy(), w0.numpy())
    # The same values are refused eagerly, in the same words.
    with pytest.raises(SambaError, match=r"must be in \[0, 1\], got 5"):
        samba.dropout(x, p=5.0)
    with pytest.raises(SambaError, match=r"must be in \[0, 1\], got nan"):
        samba.dropout(x, p=nan)
    with pytest.raises(SambaError, match="'lr' must be >= 0, got nan"):
        samba.optim.SGD(model.parameters(), lr=nan)
    # The boundaries torch accepts are accepted everywhere: p = 1 drops all.
    assert not samba.dropout(x, p=1.0).numpy().any()
    samba.session.run([x, y], outs, section_types=["FWD"], hyperparam_dict={rate: 1.0, seed: -1.0})
    _, logits = samba.session.run([x, y], outs, section_types=["FWD"])
    np.testing.assert_array_equal(logits.numpy(), 0)


def test_profiles_and_measurements(trained, tmp_path):
    model, x, y, outs, pef = trained
    s = samba.session
    trace = tmp_path / "trace.json"
    with s.samba_profile(str(trace)):
        s.run([x, y], outs, section_types=["FWD"])
    events = json.loads(trace.read_text())
    names = {e.get("name") for e in (events["traceEvents"] if isinstance(events, dict) else events)}
    assert any(n and n.startswith("SAMBA_SESSION_RUN") for n in names)
    s.start_samba_profile()
    s.end_samba_profile(None)
    with s.profiler:
        pass
    s.start_runtime_profile(timer_enabled=True)
    s.end_runtime_profile(str(tmp_path / "rt.log"))
    perf = utils.measure_performance(model, (x, y), n_iterations=3, warmup=1)
    assert perf["iterations"] == 3 and perf["batch_size"] == 12 and perf["samples_per_second"] > 0
    sections = utils.measure_sections(model, (x, y), n_iterations=2, warmup=1)
    assert [r["section_id"] for r in sections] == [0, 1, 2]


def test_reset_and_a_session_of_its_own(trained):
    model, x, y, outs, pef = trained
    other = samba.SambaSession(pef)
    assert other.get_section_types() == ["FWD", "BCKWD", "OPT"]
    other.reset("")
    with pytest.raises(SambaError) as e:
        other.get_section_types()
    assert e.value.status == "SAMBA_ERR_INVALID_STATE"
    with pytest.raises(SambaError) as e:
        other.reset(pef + ".missing")
    assert e.value.status == "SAMBA_ERR_IO"


def test_multigraph(tmp_path):
    s = samba.SambaSession()
    a, b = Net("ga"), Net("gb")
    x, y = data()
    ga = samba.SambaGraph("ga", a, (x, y), samba.optim.SGD(a.parameters(), lr=0.1))
    gb = samba.SambaGraph("gb", b, (x, y), inference=True)
    s.add_graph(ga)
    s.add_graph(gb)
    with pytest.raises(SambaError, match="ga"):
        s.add_graph(ga)
    s.add_graph(ga, overwrite=True)
    pef = s.compile_multigraph("two", pef_path=str(tmp_path / "two.pef"))
    s.init_multigraph_runtime(pef)
    outs = s.trace_multigraph(a)
    assert len(outs) == 2 and a.output_tensors is outs
    assert len(s.trace_multigraph(gb)) == 2


def test_parse_app_args_and_driver(tmp_path):
    args = parse_app_args(["compile", "-b=64", "-mb=4", "--inference", "-p", "app.pef"])
    assert (args.command, args.batch_size, args.microbatch_size, args.inference, args.pef) == \
        ("compile", 64, 4, True, "app.pef")
    args = parse_app_args(["run", "-b", "8", "--steps", "3"],
                          run_parser_fn=lambda p: p.add_argument("--steps", type=int))
    assert args.command == "run" and args.steps == 3 and not args.inference
    with pytest.raises(SystemExit):
        parse_app_args(["compile", "-b", "10", "-mb", "3"])
    model = Net("drv")
    x, y = data()
    opt = samba.optim.SGD(model.parameters(), lr=0.1)
    pef = str(tmp_path / "drv.pef")
    path = common_app_driver(parse_app_args(["compile", "-b", "12", "-p", pef]), model, (x, y), opt, name="drv")
    assert path == pef and os.path.exists(pef)
    report = common_app_driver(parse_app_args(["measure-performance", "-b", "12", "-p", pef,
                                               "--num-iterations", "2"]), model, (x, y), opt, name="drv")
    assert report["iterations"] == 2
    with pytest.raises(ValueError, match="run"):
        common_app_driver(parse_app_args(["run", "-p", pef]), model, (x, y), opt)
    assert utils.get_file_dir(__file__) == os.path.dirname(os.path.abspath(__file__))
    utils.assert_close(samba.ones(2), [1.0, 1.0])
    with pytest.raises(AssertionError):
        utils.assert_close(samba.ones(2), [1.0, 1.5])


def test_lazy_and_pinned_switches():
    s = samba.SambaSession()
    s.enable_lazy_param(seed=3)
    assert s.use_lazy_param()
    s.disable_lazy_param()
    assert not s.use_lazy_param()
    s.enable_pinned_memory()
    assert s.use_pinned_memory()
    s.disable_pinned_memory()
    assert not s.use_pinned_memory()
    s.reset_random_generator()
    s.use_legacy_names(True)
    with s.disable_graphamp():
        pass


def test_use_abexit_runs_registered_handlers_and_exits(tmp_path):
    script = tmp_path / "app.py"
    marker = tmp_path / "marker"
    script.write_text(f"""
import atexit
import sambaflow.samba as samba
atexit.register(lambda: open({str(marker)!r} + ".plain", "w").write("x"))
samba.session.atexit_register(lambda: open({str(marker)!r}, "w").write("ran"))
def main():
    raise RuntimeError("boom")
samba.session.use_abexit(main)
""")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=os.environ.copy())
    assert r.returncode == 1 and "boom" in r.stderr
    assert marker.read_text() == "ran" and not os.path.exists(str(marker) + ".plain")
    assert samba.session.use_abexit(lambda a, b=0: a + b, 2, b=3) == 5


class _Batches:
    def __init__(self, n, fail_at=None, delay=0.0):
        self.n, self.fail_at, self.delay = n, fail_at, delay

    def __len__(self):
        return self.n

    def __iter__(self):
        import time
        for i in range(self.n):
            if i == self.fail_at:
                raise OSError(f"disk read failed at batch {i}")
            time.sleep(self.delay)
            yield np.full((2, 3), i, dtype=np.float32), np.array([i, i], dtype=np.int64)


def test_sambaloader_names_order_errors_timeout_and_close():
    loader = samba.SambaLoader(_Batches(5), ["sample", "label"], maxsize=2)
    assert len(loader) == 5
    seen = []
    for x, y in loader:
        assert (x.sn_name, y.sn_name) == ("sample", "label")
        seen.append(int(y[0].item()))
    assert seen == [0, 1, 2, 3, 4]
    with pytest.raises(OSError, match="disk read failed at batch 2"):
        for _ in samba.SambaLoader(_Batches(5, fail_at=2), ["sample", "label"]):
            pass
    with pytest.raises(TimeoutError, match="0.05 s"):
        for _ in samba.SambaLoader(_Batches(2, delay=1.0), ["sample", "label"], timeout=0.05):
            pass
    before = threading.active_count()
    early = samba.SambaLoader(_Batches(100), ["sample", "label"], maxsize=1)
    for i, _ in enumerate(early):
        if i == 2:
            break
    early.close()
    assert threading.active_count() <= before
    with pytest.raises(ValueError, match="3 names"):
        next(iter(samba.SambaLoader(_Batches(1), ["a", "b", "c"])))
    with pytest.raises(ValueError, match="maxsize"):
        samba.SambaLoader(_Batches(1), ["a"], maxsize=0)


class ShiftedLoss:
    """Hugging Face's LM loss shape: logits[..., :-1, :].contiguous() before the loss."""

    def __init__(self):
        self.w = samba.parameter("shift.weight", (2, 3, 4), materializer="ones")

    def parameters(self):
        return [self.w]

    def __call__(self, x):
        return ((self.w * x)[..., :-1, :].contiguous() * x[..., 1:, :]).sum()


def test_hugging_face_loss_shift_copies_once_in_the_backward(tmp_path):
    """`:` keeps a dim whole as `...` does, so x[..., :-1, :] is one slice and
    its backward one slice_backward (each is a copy of the whole tensor), and
    the gradient of .contiguous() (a cast to the same dtype) is passed through
    rather than copied: one cast, in the forward. The gradient is still the
    sliced one."""
    model = ShiftedLoss()
    xv = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    x = samba.from_numpy(xv, name="x")
    opt = samba.optim.SGD(model.parameters(), lr=1.0)
    pef = samba.session.compile(model, (x,), opt, name="shift", pef_path=str(tmp_path / "shift.pef"))
    outs = utils.trace_graph(model, (x,), opt, pef=pef)
    trace = tmp_path / "trace.json"
    with samba.session.samba_profile(str(trace)):
        samba.session.run([x], outs)
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    kernels = [e["name"] for e in events if e.get("cat") == "kernel"]
    assert sum(n.startswith("slice_backward") for n in kernels) == 1, kernels
    assert sum("cast" in n for n in kernels) == 1, kernels
    grad = np.zeros_like(xv)
    grad[:, :-1, :] = xv[:, 1:, :] * xv[:, :-1, :]
    np.testing.assert_allclose(model.w.sn_grad.numpy(), grad, rtol=1e-6, atol=1e-6)
