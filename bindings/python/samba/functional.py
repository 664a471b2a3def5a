"""Torch functions Samba computes by composing registry ops, or that need
more than a renaming of their arguments: einsum (lowered to permute, reshape,
bmm and sum when traced or run), scaled dot-product attention (the fused
registry op; the unfused form where dropout or the weights are asked for) and
multi_head_attention_forward (nn.MultiheadAttention's body, lowered to the
fused attention op). Each works on the tensor class of its operands (at
least one must be a SambaTensor), so it sits below SambaTensor and the
__torch_function__ dispatch calls it."""
import math

from . import dtypes
from ._lib import SambaError


def _is_bool(t):
    return dtypes.from_name(t.dtype) == dtypes.bool_


def _tensor_class(*values):
    """The tensor class of the first tensor operand (SambaTensor, or the
    class __torch_function__ dispatch works with)."""
    for v in values:
        if hasattr(type(v), "_call_op"):
            return type(v)
    raise TypeError(f"expected a SambaTensor among the operands, got {[type(v).__name__ for v in values]}")


# ---- einsum ----------------------------------------------------------------------------

def _unsupported_einsum(equation, why):
    raise SambaError("SAMBA_ERR_UNSUPPORTED", f"einsum('{equation}'): {why}")


def _einsum_terms(equation, shapes):
    """The label string of each operand and of the output, with '...' replaced
    by one label per broadcast dim (right-aligned across operands)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise SambaError("SAMBA_ERR_INVALID_ARGUMENT",
                         f"einsum('{equation}'): {len(terms)} operand terms but {len(shapes)} operands")
    width = 0
    for t, shape in zip(terms, shapes):
        named = len(t.replace("...", ""))
        if "..." in t:
            width = max(width, len(shape) - named)
        elif named != len(shape):
            raise SambaError("SAMBA_ERR_SHAPE_MISMATCH",
                             f"einsum('{equation}'): term '{t}' names {named} dims; its operand has shape "
                             f"{tuple(shape)}")
    ellipsis = [chr(0x100 + i) for i in range(width)]  # never a letter of the equation

    def expand(term, dims):
        if "..." not in term:
            return list(term)
        head, _, tail = term.partition("...")
        return list(head) + ellipsis[width - dims:] + list(tail)

    labels = [expand(t, len(s) - len(t.replace("...", ""))) for t, s in zip(terms, shapes)]
    for t, ls in zip(terms, labels):
        if not all(c.isalpha() or ord(c) >= 0x100 for c in ls):
            _unsupported_einsum(equation, f"term '{t}' has a character that is not a letter")
        if len(set(ls)) != len(ls):
            _unsupported_einsum(equation, f"a label repeats within '{t}' (a diagonal or trace); Samba supports "
                                          f"each label at most once per operand")
    if arrow:
        out = expand(rhs, width) if "..." in rhs else list(rhs)
        for c in out:
            if not any(c in ls for ls in labels):
                _unsupported_einsum(equation, f"output label '{c}' names no input dim")
        if len(set(out)) != len(out):
            _unsupported_einsum(equation, "an output label repeats")
    else:
        counts = {}
        for ls in labels:
            for c in ls:
                counts[c] = counts.get(c, 0) + 1
        out = ellipsis + sorted(c for c, n in counts.items() if n == 1 and ord(c) < 0x100)
    return labels, out


def _sum_labels(x, labels, drop):
    dims = [i for i, c in enumerate(labels) if c in drop]
    if not dims:
        return x, labels
    return x._call_op("sum", [x], {"dim": dims}), [c for c in labels if c not in drop]


def _permute(x, labels, order):
    perm = [labels.index(c) for c in order]
    return x if perm == list(range(len(perm))) else x._call_op("permute", [x], {"dims": perm})


def _contract(a, la, b, lb, keep, sizes):
    """The product of a and b over their shared labels not in `keep` (batched
    over the shared ones in it), as one bmm: labels batch + left + right."""
    a, la = _sum_labels(a, la, {c for c in la if c not in lb and c not in keep})
    b, lb = _sum_labels(b, lb, {c for c in lb if c not in la and c not in keep})
    batch = [c for c in la if c in lb and c in keep]
    inner = [c for c in la if c in lb and c not in keep]
    left = [c for c in la if c not in lb]
    right = [c for c in lb if c not in la]

    def prod(ls):
        return math.prod(sizes[c] for c in ls)

    def operand(x, ls, order, rows, cols):
        # Size-1 dims broadcast against the other operand's size.
        if any(x.shape[i] != sizes[c] for i, c in enumerate(ls)):
            x = x.expand([sizes[c] for c in ls])
        x = _permute(x, ls, order)
        return x._call_op("reshape", [x], {"shape": [prod(batch), prod(rows), prod(cols)]})

    am = operand(a, la, batch + left + inner, left, inner)
    bm = operand(b, lb, batch + inner + right, inner, right)
    out = am._call_op("bmm", [am, bm])
    labels = batch + left + right
    return out._call_op("reshape", [out], {"shape": [sizes[c] for c in labels]}), labels


def einsum(equation, *operands):
    """torch.einsum over registry ops: operands are folded left to right, each
    pair contracted by one bmm; labels no later operand or the output needs
    are summed first. Each label appears at most once per operand."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    cls = _tensor_class(*operands)
    xs = [cls._coerce(x) for x in operands]
    labels, out = _einsum_terms(equation, [x.shape for x in xs])
    sizes = {}
    for x, ls in zip(xs, labels):
        for c, n in zip(ls, x.shape):
            if sizes.get(c, 1) != 1 and n != 1 and n != sizes[c]:
                raise SambaError("SAMBA_ERR_SHAPE_MISMATCH",
                                 f"einsum('{equation}'): label '{c}' has sizes {sizes[c]} and {n}")
            sizes[c] = max(sizes.get(c, 1), n)
    cur, cur_labels = xs[0], labels[0]
    for i in range(1, len(xs)):
        keep = set(out).union(*[set(ls) for ls in labels[i + 1:]])
        cur, cur_labels = _contract(cur, cur_labels, xs[i], labels[i], keep, sizes)
    cur, cur_labels = _sum_labels(cur, cur_labels, {c for c in cur_labels if c not in out})
    if any(cur.shape[cur_labels.index(c)] != sizes[c] for c in cur_labels):
        cur = cur.expand([sizes[c] for c in cur_labels])
    return _permute(cur, cur_labels, out)


# ---- attention ---------------------------------------------------------------------------

def _unfused_attention(q, k, v, attn_mask, dropout_p, is_causal, scale):
    """softmax(q kᵀ · scale + mask), dropout, @ v: (output, weights), for
    dropout (the registry's dropout op and its random stream) and for callers
    that want the weights."""
    s = q._call_op("mul", [q._call_op("matmul", [q, k.transpose(-2, -1)]), q._coerce(scale)])
    if is_causal:
        rows, keys = s.shape[-2], s.shape[-1]
        i = q._call_op("arange", [], {"end": float(rows), "dtype": "int64"}).reshape(rows, 1)
        j = q._call_op("arange", [], {"end": float(keys), "dtype": "int64"})
        attn_mask = q._call_op("le", [j, i])
    if attn_mask is not None:
        attn_mask = q._coerce(attn_mask)
        if _is_bool(attn_mask):
            s = s._call_op("masked_fill", [s, attn_mask._call_op("logical_not", [attn_mask])],
                           {"value": -math.inf})
        else:
            s = s + attn_mask
    w = s._call_op("softmax", [s], {"dim": -1})
    if dropout_p > 0.0:
        w = w._call_op("dropout", [w], {"p": float(dropout_p), "training": True})
    return w._call_op("matmul", [w, v]), w


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """torch.nn.functional.scaled_dot_product_attention (torch 2's signature):
    the fused registry op; with dropout_p > 0 the unfused form with the
    registry's dropout. attn_mask: bool (True attends) or float (added)."""
    cls = _tensor_class(query, key, value)
    q, k, v = cls._coerce(query), cls._coerce(key), cls._coerce(value)
    if attn_mask is not None and is_causal:
        raise SambaError("SAMBA_ERR_INVALID_ARGUMENT",
                         "scaled_dot_product_attention: give either attn_mask or is_causal, not both")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    if dropout_p > 0.0:
        return _unfused_attention(q, k, v, attn_mask, dropout_p, is_causal, scale)[0]
    mask = None if attn_mask is None else cls._coerce(attn_mask)
    out, _ = cls._call_op("scaled_dot_product_attention", [q, k, v, mask],
                          {"is_causal": bool(is_causal), "scale": float(scale)})
    return out


def _scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, need_attn_weights=False,
                                  is_causal=False):
    """torch 1.13's torch.nn.functional._scaled_dot_product_attention:
    (output, weights); weights only when need_attn_weights (else None)."""
    if need_attn_weights:
        cls = _tensor_class(query, key, value)
        q, k, v = cls._coerce(query), cls._coerce(key), cls._coerce(value)
        return _unfused_attention(q, k, v, attn_mask, dropout_p, is_causal, 1.0 / math.sqrt(q.shape[-1]))
    return scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal), None


def _additive_mask(x, mask):
    """A torch MultiheadAttention mask (bool: True masks out; float: added) as a float bias."""
    if not _is_bool(mask):
        return mask
    zeros = x.new_zeros(tuple(mask.shape))
    return zeros._call_op("masked_fill", [zeros, mask], {"value": -math.inf})


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True):
    """torch.nn.functional.multi_head_attention_forward (sequence-first
    inputs, as nn.MultiheadAttention passes them) lowered to the fused
    attention op; the unfused form with dropout or when the weights are
    asked for."""
    extras = {"bias_k": bias_k, "bias_v": bias_v, "static_k": static_k, "static_v": static_v}
    given = [n for n, t in extras.items() if t is not None] + (["add_zero_attn"] if add_zero_attn else [])
    if given:
        raise SambaError("SAMBA_ERR_UNSUPPORTED",
                         f"multi_head_attention_forward: {', '.join(given)} not supported on Samba")
    cls = _tensor_class(query, key, value)
    query, key, value = cls._coerce(query), cls._coerce(key), cls._coerce(value)
    batched = query.dim() == 3
    if not batched:
        query, key, value = (t.unsqueeze(1) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = cls._coerce(key_padding_mask).unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    head_dim = embed_dim // num_heads
    if embed_dim != embed_dim_to_check or head_dim * num_heads != embed_dim:
        raise SambaError("SAMBA_ERR_SHAPE_MISMATCH",
                         f"multi_head_attention_forward: embed dim {embed_dim} (expected {embed_dim_to_check}) "
                         f"is not a multiple of num_heads {num_heads}")
    if use_separate_proj_weight:
        weights = [cls._coerce(w) for w in (q_proj_weight, k_proj_weight, v_proj_weight)]
    else:
        weights = list(cls._coerce(in_proj_weight).chunk(3))
    biases = [None] * 3 if in_proj_bias is None else list(cls._coerce(in_proj_bias).chunk(3))

    def heads(x, w, b, length):
        x = cls._call_op("linear", [x, w, b])
        return x.reshape(length, bsz * num_heads, head_dim).transpose(0, 1)

    q = heads(query, weights[0], biases[0], tgt_len)
    k = heads(key, weights[1], biases[1], src_len)
    v = heads(value, weights[2], biases[2], src_len)
    mask = None
    if attn_mask is not None:
        mask = _additive_mask(q, cls._coerce(attn_mask))
    if key_padding_mask is not None:
        kpm = _additive_mask(q, cls._coerce(key_padding_mask)).reshape(bsz, 1, 1, src_len)
        kpm = kpm.expand(-1, num_heads, -1, -1).reshape(bsz * num_heads, 1, src_len)
        mask = kpm if mask is None else mask + kpm
    dropout_p = dropout_p if training else 0.0
    weights_out = None
    if need_weights or dropout_p > 0.0:
        out, weights_out = _unfused_attention(q, k, v, mask, dropout_p, False, 1.0 / math.sqrt(head_dim))
    else:
        out = scaled_dot_product_attention(q, k, v, mask)
    out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
    out = cls._call_op("linear", [out, cls._coerce(out_proj_weight),
                                  None if out_proj_bias is None else cls._coerce(out_proj_bias)])
    out = out.reshape(tgt_len, bsz, embed_dim)
    if not batched:
        out = out.squeeze(1)
    if not need_weights:
        return out, None
    weights_out = weights_out.reshape(bsz, num_heads, tgt_len, src_len)
    if average_attn_weights:
        weights_out = weights_out.mean(dim=[1])
    if not batched:
        weights_out = weights_out.squeeze(0)
    return out, weights_out
