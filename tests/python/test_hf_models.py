"""Models someone else wrote run unchanged: Hugging Face GPT-2 and BERT (two
layers, small hidden size, random init from a seeded config) and torch's
TransformerEncoderLayer and MultiheadAttention, converted with
from_torch_model_, give PyTorch's outputs eagerly and from a compiled PEF
and train like PyTorch; pretrained models load with from_pretrained from a
directory the test writes (nothing is downloaded).

Needs transformers (4.35, the last line for torch 1.13): ctest runs this file
in the venv scripts/setup_python_env.sh makes (python.hf_models)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", reason="transformers is installed by scripts/setup_python_env.sh")
import torch.nn as nn  # noqa: E402

import sambaflow.samba as samba  # noqa: E402

SEQ, BATCH, VOCAB = 8, 2, 64


def gpt2():
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=16,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(config).eval()


def bert():
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=64,
                                     vocab_size=VOCAB, max_position_embeddings=16, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0)
    return transformers.BertModel(config).eval()


def encoder_layer():
    return nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).eval()


def attention():
    return nn.MultiheadAttention(32, 4, batch_first=True).eval()


def token_ids():
    return torch.randint(0, VOCAB, (BATCH, SEQ))


def padding_mask():
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, SEQ - 3:] = 0
    return mask


# (model factory, inputs factory, the forward as the user writes it)
CASES = {
    "gpt2": (gpt2, lambda: (token_ids(),), lambda m, ids: m(ids, use_cache=False).logits),
    "gpt2_padded": (gpt2, lambda: (token_ids(), padding_mask()),
                    lambda m, ids, mask: m(ids, attention_mask=mask, use_cache=False).logits),
    "bert": (bert, lambda: (token_ids(), padding_mask()),
             lambda m, ids, mask: m(ids, attention_mask=mask).last_hidden_state),
    "bert_pooled": (bert, lambda: (token_ids(),), lambda m, ids: m(ids).pooler_output),
    "encoder_layer": (encoder_layer, lambda: (torch.randn(BATCH, SEQ, 32),), lambda m, x: m(x)),
    "encoder_layer_causal": (encoder_layer, lambda: (torch.randn(BATCH, SEQ, 32),),
                             lambda m, x: m(x, src_mask=nn.Transformer.generate_square_subsequent_mask(SEQ))),
    "multihead_attention": (attention, lambda: (torch.randn(BATCH, SEQ, 32),), lambda m, x: m(x, x, x)[0]),
    "multihead_attention_padded": (attention, lambda: (torch.randn(BATCH, SEQ, 32),),
                                   lambda m, x: m(x, x, x, key_padding_mask=padding_mask() == 0)[0]),
}


def prepared(case):
    """The model (seeded), its inputs, and PyTorch's output before conversion."""
    make_model, make_inputs, forward = CASES[case]
    torch.manual_seed(0)
    model = make_model()
    inputs = make_inputs()
    with torch.no_grad():
        want = forward(model, *inputs).numpy()
    samba.from_torch_model_(model)
    return model, inputs, forward, want


@pytest.mark.parametrize("case", sorted(CASES))
def test_eager_forward_matches_pytorch(case):
    model, inputs, forward, want = prepared(case)
    got = forward(model, *[samba.from_torch_tensor(t) for t in inputs])
    assert isinstance(got, samba.SambaTensor)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


class Forward(nn.Module):
    """The user's forward as a module, so the session can trace it."""

    def __init__(self, model, forward):
        super().__init__()
        self.model = model
        self.forward_fn = forward

    def forward(self, *inputs):
        return self.forward_fn(self.model, *inputs)


@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_forward_matches_pytorch(case, tmp_path):
    model, inputs, forward, want = prepared(case)
    traced = Forward(model, forward)
    xs = [samba.from_torch_tensor(t, name=f"input{i}", batch_dim=0) for i, t in enumerate(inputs)]
    session = samba.session
    pef = session.compile(traced, xs, None, name=case, pef_path=str(tmp_path / f"{case}.pef"), loss_indices=[0])
    outs = samba.utils.trace_graph(traced, xs, None, pef=pef, init_output_grads=False)
    got = session.run(xs, outs, section_types=["FWD"])
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def lm_inputs():
    return token_ids(), torch.ones(BATCH, SEQ, dtype=torch.long), token_ids()


def classifier():
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    return nn.Sequential(layer, nn.Flatten(), nn.Linear(SEQ * 32, 5))


# (model factory, inputs factory (the last is the target), the loss as the user writes it)
TRAINING = {
    "gpt2": (lambda: transformers.GPT2LMHeadModel(gpt2().config), lm_inputs,
             lambda m, ids, mask, labels: m(ids, attention_mask=mask, labels=labels, use_cache=False).loss),
    "bert": (lambda: transformers.BertForMaskedLM(bert().config), lm_inputs,
             lambda m, ids, mask, labels: m(ids, attention_mask=mask, labels=labels).loss),
    "encoder_layer": (classifier, lambda: (torch.randn(BATCH, SEQ, 32), torch.randint(0, 5, (BATCH,))),
                      lambda m, x, labels: nn.functional.cross_entropy(m(x), labels)),
}
ADAMW = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}


@pytest.mark.parametrize("case", [
    "gpt2", "bert", "encoder_layer",
])
def test_compiled_adamw_training_matches_pytorch(case, tmp_path):
    make_model, make_inputs, loss_of = TRAINING[case]
    torch.manual_seed(0)
    model = make_model().train()
    reference = make_model().train()
    reference.load_state_dict(model.state_dict())
    inputs = make_inputs()
    opt = torch.optim.AdamW(reference.parameters(), **ADAMW)
    want, noise = [], {}
    for _ in range(10):
        opt.zero_grad()
        loss = loss_of(reference, *inputs)
        loss.backward()
        # Gradients that are zero in exact arithmetic (an attention key bias
        # cannot change a softmax) are rounding noise, which AdamW scales up
        # to steps of lr: those elements are not compared.
        noise = noise or {n: p.grad.abs() < 1e-7 for n, p in reference.named_parameters()}
        opt.step()
        want.append(loss.item())

    samba.from_torch_model_(model)
    traced = Forward(model, loss_of)
    xs = [samba.from_torch_tensor(t, name=f"input{i}", batch_dim=0) for i, t in enumerate(inputs)]
    optim = samba.optim.AdamW(traced.parameters(), **ADAMW)
    session = samba.session
    pef = session.compile(traced, xs, optim, name=case, pef_path=str(tmp_path / f"{case}.pef"))
    outs = samba.utils.trace_graph(traced, xs, optim, pef=pef)
    got = []
    for _ in range(10):
        result = session.run(xs, outs)
        got.append((result[0] if isinstance(result, (list, tuple)) else result).item())
    np.testing.assert_allclose(got, want, rtol=1e-5)
    trained = dict(reference.named_parameters())
    for name, p in model.named_parameters():
        kept = ~noise[name].numpy()
        np.testing.assert_allclose(p.cpu().numpy()[kept], trained[name].detach().numpy()[kept], atol=1e-4,
                                   err_msg=name)


PRETRAINED = {
    "gpt2": (gpt2, transformers.GPT2LMHeadModel, lambda: (token_ids(),),
             lambda m, ids: m(ids, use_cache=False).logits),
    "bert": (bert, transformers.BertModel, lambda: (token_ids(), padding_mask()),
             lambda m, ids, mask: m(ids, attention_mask=mask).last_hidden_state),
}


@pytest.mark.parametrize("case, safe_serialization", [("gpt2", True), ("gpt2", False), ("bert", True)],
                         ids=["gpt2-safetensors", "gpt2-pytorch_model.bin", "bert-safetensors"])
def test_pretrained_from_a_local_directory_runs_with_its_weights_on_the_device(case, safe_serialization, tmp_path):
    """save_pretrained then from_pretrained of the directory (nothing is downloaded):
    the converted model's compiled forward gives the saved model's outputs."""
    make_model, model_class, make_inputs, forward = PRETRAINED[case]
    torch.manual_seed(1)
    saved = make_model()
    inputs = make_inputs()
    saved.save_pretrained(tmp_path, safe_serialization=safe_serialization)
    assert (tmp_path / ("model.safetensors" if safe_serialization else "pytorch_model.bin")).exists()
    with torch.no_grad():
        want = forward(saved, *inputs).numpy()
    torch.manual_seed(2)  # a different random init: only the loaded weights give `want`
    model = model_class.from_pretrained(tmp_path, local_files_only=True).eval()
    samba.from_torch_model_(model)
    state = saved.state_dict()
    for name, p in model.named_parameters():
        assert isinstance(p, samba.SambaTensor), name
        np.testing.assert_array_equal(np.asarray(p.numpy()), state[name].numpy(), err_msg=name)

    traced = Forward(model, forward)
    xs = [samba.from_torch_tensor(t, name=f"input{i}", batch_dim=0) for i, t in enumerate(inputs)]
    session = samba.session
    pef = session.compile(traced, xs, None, name=f"pretrained_{case}", pef_path=str(tmp_path / f"{case}.pef"),
                          loss_indices=[0])
    outs = samba.utils.trace_graph(traced, xs, None, pef=pef, init_output_grads=False)
    got = session.run(xs, outs, section_types=["FWD"])[0]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    session.to_cpu(traced)
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(np.asarray(p.numpy()), state[name].numpy(), err_msg=name)


def test_training_pef_with_train_false_runs_without_dropout(tmp_path):
    """GPT-2 with its dropouts on: run(train=False) of the training PEF gives
    PyTorch's eval() logits; train=True drops activations."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=16,
                                     resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1)
    model = transformers.GPT2LMHeadModel(config)
    inputs = lm_inputs()
    with torch.no_grad():
        want = model.eval()(inputs[0], attention_mask=inputs[1], use_cache=False).logits.numpy()
    model.train()
    samba.from_torch_model_(model)

    def loss_and_logits(m, ids, mask, labels):
        out = m(ids, attention_mask=mask, labels=labels, use_cache=False)
        return out.loss, out.logits

    traced = Forward(model, loss_and_logits)
    xs = [samba.from_torch_tensor(t, name=f"input{i}", batch_dim=0) for i, t in enumerate(inputs)]
    optim = samba.optim.AdamW(traced.parameters(), **ADAMW)
    session = samba.session
    pef = session.compile(traced, xs, optim, name="gpt2_dropout", pef_path=str(tmp_path / "gpt2_dropout.pef"))
    outs = samba.utils.trace_graph(traced, xs, optim, pef=pef)
    evaluated = session.run(xs, outs, section_types=["FWD"], train=False)[1].numpy().copy()
    np.testing.assert_allclose(evaluated, want, rtol=1e-5, atol=1e-5)
    dropped = session.run(xs, outs, section_types=["FWD"])[1].numpy()
    assert np.abs(dropped - want).max() > 1e-2, "train=True keeps the dropouts on"
