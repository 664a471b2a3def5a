"""The torch mappings of the ops attention models reach: sort / topk /
kthvalue with torch's named (values, indices) results, gather / scatter,
expand / repeat with sizes, bmm / baddbmm, einsum, scaled dot-product
attention and nn.MultiheadAttention. Forward results and gradients are
compared with torch 1.13 in float64."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import samba  # noqa: E402
import samba.utils as utils  # noqa: E402

RNG = np.random.default_rng(7)


def leaves(*shapes):
    """(samba leaves, torch leaves) holding the same random float64 values."""
    arrays = [RNG.standard_normal(s) for s in shapes]
    ours = [samba.from_numpy(a.copy()).requires_grad_() for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    return ours, theirs


def check(ours, theirs, got, want, atol=1e-10):
    """got == want, and the gradients of sum(out * w) for a random w agree."""
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    loss_ours, loss_theirs = None, None
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.detach().numpy(), atol=atol, rtol=1e-9)
        if not w.dtype.is_floating_point:
            continue
        weight = RNG.standard_normal(tuple(w.shape))
        term_ours = samba.sum(g * samba.from_numpy(weight))
        term_theirs = (w * torch.from_numpy(weight)).sum()
        loss_ours = term_ours if loss_ours is None else loss_ours + term_ours
        loss_theirs = term_theirs if loss_theirs is None else loss_theirs + term_theirs
    loss_ours.backward()
    loss_theirs.backward()
    for o, t in zip(ours, theirs):
        if t.grad is None:
            assert o.grad is None or not np.any(o.grad.numpy())
            continue
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), atol=atol, rtol=1e-9)


# ---- ordering ----------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda x: x.sort(),
    lambda x: torch.sort(x, dim=0, descending=True),
    lambda x: x.topk(2),
    lambda x: torch.topk(x, 3, dim=0, largest=False),
    lambda x: x.kthvalue(2, 1, keepdim=True),
    lambda x: torch.kthvalue(x, 3, dim=0),
    lambda x: x.median(1),
])
def test_ordering_returns_named_values_and_indices(call):
    (x,), (tx,) = leaves((4, 5))
    got, want = call(x), call(tx)
    assert type(got).__name__ == type(want).__name__
    values, indices = got  # unpacks into the two fields, not into rows
    assert got.values is values and got.indices is indices and got[1] is indices
    np.testing.assert_array_equal(indices.numpy(), want.indices.numpy())
    check([x], [tx], values, want.values)


def test_stable_sort_keeps_ties_in_order_and_argsort_msort():
    a = np.array([[3, 1, 3, 2, 1, 3], [0, 0, 5, 5, 0, 1]], dtype=np.int64)
    x, tx = samba.from_numpy(a), torch.from_numpy(a)
    for descending in (False, True):
        got = torch.sort(x, dim=1, descending=descending, stable=True)
        want = torch.sort(tx, dim=1, descending=descending, stable=True)
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
    np.testing.assert_array_equal(x.argsort(dim=1, descending=True).numpy(),
                                  tx.argsort(dim=1, descending=True, stable=True).numpy())
    np.testing.assert_array_equal(torch.msort(x).numpy(), torch.msort(tx).numpy())
    assert x.median().item() == tx.median().item()


def test_median_of_a_line_with_nan_is_nan_at_the_first_nan():
    a = np.array([[1.0, np.nan, 3.0, np.nan, 0.0], [4.0, 2.0, 3.0, 1.0, 5.0]])
    x, tx = samba.from_numpy(a), torch.from_numpy(a)
    got, want = x.median(1), tx.median(1)
    np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    assert np.isnan(x.median().item()) and x[1].median().item() == 3.0


def test_sort_puts_nan_last_and_topk_refuses_k_too_large():
    x = samba.from_numpy(np.array([2.0, np.nan, -1.0]))
    np.testing.assert_array_equal(x.sort().indices.numpy(), [2, 0, 1])
    np.testing.assert_array_equal(x.sort(descending=True).indices.numpy(), [1, 0, 2])
    with pytest.raises(samba.SambaError, match="k = 4 is out of range"):
        x.topk(4)
    with pytest.raises(samba.SambaError, match="mode"):
        x.mode()


# ---- indexing along a dim -------------------------------------------------------------------

def test_gather_scatter_and_scatter_add_take_torch_argument_order():
    index = np.array([[2, 0, 1], [1, 1, 3]])
    i, ti = samba.from_numpy(index), torch.from_numpy(index)
    (x, src), (tx, tsrc) = leaves((2, 4), (2, 3))
    check([x], [tx], torch.gather(x, 1, i), torch.gather(tx, 1, ti))
    check([x], [tx], x.gather(1, i), tx.gather(1, ti))
    rows = np.array([[0, 1, 2], [2, 0, 1]])
    (x, src), (tx, tsrc) = leaves((3, 3), (2, 3))
    r, tr = samba.from_numpy(rows), torch.from_numpy(rows)
    check([x, src], [tx, tsrc], x.scatter(0, r, src), tx.scatter(0, tr, tsrc))
    (x, src), (tx, tsrc) = leaves((3, 3), (2, 3))
    check([x, src], [tx, tsrc], torch.scatter_add(x, 0, r, src), torch.scatter_add(tx, 0, tr, tsrc))
    (x,), (tx,) = leaves((3, 3))
    check([x], [tx], x.scatter(0, r, value=0.5), tx.scatter(0, tr, value=0.5))


# ---- sizes ------------------------------------------------------------------------------------

def test_expand_and_repeat_take_sizes():
    (x,), (tx,) = leaves((3, 1))
    check([x], [tx], x.expand(2, -1, 4), tx.expand(2, -1, 4))
    (x,), (tx,) = leaves((3, 1))
    check([x], [tx], x.expand((3, 5)), tx.expand((3, 5)))
    (x, y), (tx, ty) = leaves((1, 4), (3, 4))
    check([x], [tx], x.expand_as(y), tx.expand_as(ty))
    (x,), (tx,) = leaves((2, 3))
    check([x], [tx], x.repeat(2, 1, 3), tx.repeat(2, 1, 3))
    (x,), (tx,) = leaves((2, 3))
    check([x], [tx], x.repeat((1, 2)), tx.repeat((1, 2)))


# ---- products -----------------------------------------------------------------------------

def test_bmm_and_baddbmm():
    (a, b), (ta, tb) = leaves((2, 3, 4), (2, 4, 5))
    check([a, b], [ta, tb], torch.bmm(a, b), torch.bmm(ta, tb))
    (c, a, b), (tc, ta, tb) = leaves((1, 5), (2, 3, 4), (2, 4, 5))
    check([c, a, b], [tc, ta, tb], torch.baddbmm(c, a, b, beta=0.5, alpha=-2.0),
          torch.baddbmm(tc, ta, tb, beta=0.5, alpha=-2.0))
    (c, a, b), (tc, ta, tb) = leaves((2, 3, 5), (2, 3, 4), (2, 4, 5))
    check([c, a, b], [tc, ta, tb], c.baddbmm(a, b), tc.baddbmm(ta, tb))


@pytest.mark.parametrize("equation,shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij", [(3, 4)]),
    ("ij,jk", [(3, 4), (4, 2)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("i,j->ij", [(3,), (4,)]),
    ("bn,n->b", [(3, 4), (4,)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("ij,jk,kl->li", [(2, 3), (3, 4), (4, 5)]),
    ("bij,bkj->", [(2, 3, 4), (2, 5, 4)]),
    ("ab,cb->abc", [(2, 3), (4, 1)]),
])
def test_einsum_matches_torch(equation, shapes):
    ours, theirs = leaves(*shapes)
    check(ours, theirs, torch.einsum(equation, *ours), torch.einsum(equation, *theirs))


def test_einsum_list_form_and_refused_diagonal():
    (a, b), (ta, tb) = leaves((2, 3), (3, 4))
    np.testing.assert_allclose(samba.einsum("ij,jk->ik", [a, b]).numpy(),
                               torch.einsum("ij,jk->ik", [ta, tb]).detach().numpy())
    with pytest.raises(samba.SambaError, match="repeats within 'ii'"):
        torch.einsum("ii->i", samba.randn(3, 3))


# ---- attention -----------------------------------------------------------------------------

def reference_attention(q, k, v, mask=None, causal=False, scale=None):
    s = q @ k.transpose(-2, -1) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if causal:
        mask = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).tril()
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("rows,keys", [(5, 7), (130, 70)])
def test_fused_attention_forward_and_backward(rows, keys):
    (q, k, v), (tq, tk, tv) = leaves((2, 3, rows, 8), (2, 3, keys, 8), (2, 3, keys, 4))
    check([q, k, v], [tq, tk, tv], samba.functional.scaled_dot_product_attention(q, k, v, scale=0.3),
          reference_attention(tq, tk, tv, scale=0.3))
    (q, k, v), (tq, tk, tv) = leaves((2, rows, 8), (2, rows, 8), (2, rows, 4))
    got, weights = F._scaled_dot_product_attention(q, k, v, is_causal=True)
    assert weights is None
    check([q, k, v], [tq, tk, tv], got, reference_attention(tq, tk, tv, causal=True))


def test_fused_attention_masks():
    keep = RNG.random((3, 1, 4, 6)) < 0.7
    keep[..., 0] = True  # every query attends some key
    (q, k, v), (tq, tk, tv) = leaves((3, 2, 4, 5), (3, 2, 6, 5), (3, 2, 6, 5))
    got = samba.functional.scaled_dot_product_attention(q, k, v, samba.from_numpy(keep))
    check([q, k, v], [tq, tk, tv], got, reference_attention(tq, tk, tv, torch.from_numpy(keep)))
    (q, k, v, bias), (tq, tk, tv, tbias) = leaves((3, 4, 5), (3, 6, 5), (3, 6, 5), (4, 6))
    got = samba.functional.scaled_dot_product_attention(q, k, v, bias)
    check([q, k, v, bias], [tq, tk, tv, tbias], got, reference_attention(tq, tk, tv, tbias))
    with pytest.raises(samba.SambaError, match="either attn_mask or is_causal"):
        samba.functional.scaled_dot_product_attention(q, k, v, bias, is_causal=True)


def test_attention_weights_and_dropout_take_the_unfused_form():
    (q, k, v), (tq, tk, tv) = leaves((2, 4, 5), (2, 6, 5), (2, 6, 3))
    out, weights = F._scaled_dot_product_attention(q, k, v, need_attn_weights=True)
    want = torch.softmax(tq @ tk.transpose(-2, -1) / 5 ** 0.5, -1)
    np.testing.assert_allclose(weights.numpy(), want.detach().numpy(), atol=1e-12)
    check([q, k, v], [tq, tk, tv], out, want @ tv)
    dropped = samba.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert dropped.shape == (2, 4, 3)


def mha_inputs():
    x = RNG.standard_normal((5, 3, 8))  # (sequence, batch, features), as the module passes them
    pad = np.zeros((3, 5), dtype=bool)
    pad[1, 3:] = True  # padded keys of the second sequence
    causal = np.triu(np.ones((5, 5), dtype=bool), 1)
    return x, pad, causal


@pytest.mark.parametrize("need_weights,training", [(False, False), (True, False), (False, True)])
def test_multi_head_attention_forward_matches_torch(need_weights, training):
    torch.manual_seed(0)
    module = nn.MultiheadAttention(8, 2).double()
    x, pad, causal = mha_inputs()
    args = (8, 2, module.in_proj_weight, module.in_proj_bias, None, None, False, 0.0, module.out_proj.weight,
            module.out_proj.bias)
    kwargs = {"training": training, "need_weights": need_weights}
    tx = torch.tensor(x, requires_grad=True)
    want, want_w = F.multi_head_attention_forward(tx, tx, tx, *args, key_padding_mask=torch.from_numpy(pad),
                                                  attn_mask=torch.from_numpy(causal), **kwargs)
    sx = samba.from_numpy(x.copy()).requires_grad_()
    sargs = args[:2] + tuple(samba.from_numpy(t.detach().numpy().copy()) if isinstance(t, torch.Tensor) else t
                             for t in args[2:])
    got, got_w = F.multi_head_attention_forward(sx, sx, sx, *sargs, key_padding_mask=samba.from_numpy(pad),
                                                attn_mask=samba.from_numpy(causal), **kwargs)
    if need_weights:
        np.testing.assert_allclose(got_w.numpy(), want_w.detach().numpy(), atol=1e-10)
    else:
        assert got_w is None
    check([sx], [tx], got, want)


def test_multi_head_attention_forward_refuses_bias_kv():
    x = samba.randn(5, 3, 8)
    w, b = samba.randn(24, 8), samba.randn(24)
    with pytest.raises(samba.SambaError, match="bias_k, bias_v not supported"):
        F.multi_head_attention_forward(x, x, x, 8, 2, w, b, samba.randn(1, 1, 8), samba.randn(1, 1, 8), False, 0.0,
                                       samba.randn(8, 8), None)


def test_multihead_attention_module_matches_torch():
    if not hasattr(samba.SambaTensor, "is_nested"):
        pytest.skip("nn.MultiheadAttention reads is_nested, which the torch front end's tensor attributes add")
    torch.manual_seed(0)
    module = nn.MultiheadAttention(8, 2, batch_first=True).double()
    theirs = nn.MultiheadAttention(8, 2, batch_first=True).double()
    theirs.load_state_dict({n: p.detach().clone() for n, p in module.state_dict().items()})
    samba.from_torch_model_(module)
    x, pad, causal = mha_inputs()
    x = x.transpose(1, 0, 2).copy()
    sx, tx = samba.from_numpy(x), torch.from_numpy(x)
    got, _ = module(sx, sx, sx, key_padding_mask=samba.from_numpy(pad), attn_mask=samba.from_numpy(causal),
                    need_weights=False)
    want, _ = theirs(tx, tx, tx, key_padding_mask=torch.from_numpy(pad), attn_mask=torch.from_numpy(causal),
                     need_weights=False)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), atol=1e-10)

    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True).double().eval()
    reference = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True).double().eval()
    reference.load_state_dict(layer.state_dict())
    samba.from_torch_model_(layer)
    np.testing.assert_allclose(layer(sx, src_key_padding_mask=samba.from_numpy(pad)).numpy(),
                               reference(tx, src_key_padding_mask=torch.from_numpy(pad)).detach().numpy(), atol=1e-10)


# ---- compiled ------------------------------------------------------------------------------

class CausalAttentionClassifier:
    """One causal self-attention head (the fused op), mean over the sequence,
    an einsum projection to 3 classes."""

    def __init__(self):
        self.wq, self.wk, self.wv = (samba.parameter(f"att.{n}", (6, 4)) for n in "qkv")
        self.wo = samba.parameter("att.out", (3, 6))

    def parameters(self):
        return [self.wq, self.wk, self.wv, self.wo]

    def __call__(self, x, y):
        q, k, v = (samba.linear(x, w) for w in (self.wq, self.wk, self.wv))
        h = samba.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        logits = samba.einsum("bd,cd->bc", h.mean(dim=[1]), self.wo)
        return samba.cross_entropy(logits, y), logits


def test_compiled_fused_attention_and_einsum_gradients_match_torch(tmp_path):
    model = CausalAttentionClassifier()
    x = RNG.standard_normal((4, 5, 4)).astype(np.float32)
    y = np.array([0, 2, 1, 2])
    sx, sy = samba.from_numpy(x, name="x"), samba.from_numpy(y, name="y")
    weights = [torch.tensor(p.numpy().copy(), requires_grad=True) for p in model.parameters()]
    opt = samba.optim.SGD(model.parameters(), lr=0.0)
    pef = samba.session.compile(model, (sx, sy), opt, name="att", pef_path=str(tmp_path / "att.pef"))
    outs = utils.trace_graph(model, (sx, sy), opt, pef=pef)
    loss, _ = samba.session.run([sx, sy], outs, section_types=["FWD", "BCKWD"])

    wq, wk, wv, wo = weights
    tx = torch.from_numpy(x)
    h = reference_attention(tx @ wq.T, tx @ wk.T, tx @ wv.T, causal=True)
    want = F.cross_entropy(h.mean(1) @ wo.T, torch.from_numpy(y))
    want.backward()
    assert loss.item() == pytest.approx(want.item(), rel=1e-5)
    for p, w in zip(model.parameters(), weights):
        np.testing.assert_allclose(p.sn_grad.numpy(), w.grad.numpy(), rtol=1e-4, atol=1e-6)
