"""The loss-output contract (SambaSession.compile's docstring, samba_compile_options_set_loss_indices
in include/samba/compile.h): which outputs backward starts from, and from which gradient. The same
three cases as tests/capi/loss_outputs_test.c, through the binding."""
import numpy as np

import sambaflow.samba as samba

W = (0.3 * np.sin(1.3 * np.arange(12) + 2)).astype(np.float32).reshape(3, 4)
B = (0.3 * np.sin(1.3 * np.arange(3) + 1)).astype(np.float32)


class Net:
    """logits = linear(x); returns what `returns` names."""

    def __init__(self, returns):
        self.returns = returns
        self.w = samba.from_numpy(W.copy(), name="fc.weight").requires_grad_()
        self.b = samba.from_numpy(B.copy(), name="fc.bias").requires_grad_()

    def __call__(self, x, y):
        logits = samba.linear(x, self.w, self.b)
        if self.returns == "logits":
            return logits
        if self.returns == "sum":
            return samba.sum(logits)
        loss = samba.cross_entropy(logits, y)
        return (loss, logits) if self.returns == "loss, logits" else loss


def batch():
    x = np.cos(0.9 * np.arange(24)).astype(np.float32).reshape(6, 4)
    y = np.array([0, 1, 2, 2, 1, 0], dtype=np.int64)
    return samba.from_numpy(x, name="x"), samba.from_numpy(y, name="y")


def step(tmp_path, returns, loss_indices=None):
    """One step without an optimizer: (the parameters' gradients, the gradient output 1 started from)."""
    s = samba.SambaSession()
    net = Net(returns)
    x, y = batch()
    pef = s.compile(net, [x, y], name="loss_outputs", pef_path=str(tmp_path / f"{returns}.pef"),
                    loss_indices=loss_indices)
    outs = s.trace_graph(net, [x, y], pef_path=pef)
    s.run([x, y], outs)
    grads = np.concatenate([g.numpy().ravel() for g in s.get_tensors_by_name(["fc.weight.grad", "fc.bias.grad"])])
    with_out_grad = len(outs) > 1 and loss_indices is None
    out_grad = s.get_tensors_by_name([outs[1].sn_name + ".grad"])[0].numpy() if with_out_grad else None
    return grads, out_grad


def test_loss_and_logits_without_loss_indices_trains_on_the_loss_alone(tmp_path, capfd):
    want, _ = step(tmp_path, "loss")
    got, logits_grad = step(tmp_path, "loss, logits")
    assert "warning" not in capfd.readouterr().err
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_array_equal(logits_grad, np.zeros((6, 3), np.float32))


def test_loss_indices_differentiates_only_those_outputs(tmp_path, capfd):
    want, _ = step(tmp_path, "loss")
    got, _ = step(tmp_path, "loss, logits", loss_indices=[0])
    assert "warning" not in capfd.readouterr().err
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_a_non_scalar_output_alone_is_the_loss_with_a_warning(tmp_path, capfd):
    want, _ = step(tmp_path, "sum")
    assert "warning" not in capfd.readouterr().err
    got, _ = step(tmp_path, "logits")
    err = capfd.readouterr().err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1, err
    assert "output 0" in warnings[0] and "[6, 3]" in warnings[0] and "loss_indices" in warnings[0]
    np.testing.assert_allclose(got, want, atol=1e-5)
