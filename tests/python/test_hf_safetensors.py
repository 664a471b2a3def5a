"""A Hugging Face checkpoint feeds Samba: a GPT-2 saved by
save_pretrained(safe_serialization=True) loads into a compiled model, which
then gives PyTorch's outputs. Runs in the HF venv (scripts/setup_python_env.sh,
ctest python.hf_safetensors); skipped when transformers is absent."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import sambaflow.samba as samba  # noqa: E402
from sambaflow.samba import session  # noqa: E402

CONFIG = dict(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=16)


def saved_gpt2(tmp_path):
    """A randomly initialized GPT-2 and the directory save_pretrained wrote."""
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**CONFIG)).eval()
    out = tmp_path / "gpt2"
    model.save_pretrained(str(out), safe_serialization=True)
    assert (out / "model.safetensors").exists()
    return model, out / "model.safetensors"


class EmbeddingHead(nn.Module):
    """GPT-2's token and position embeddings, final layer norm and tied head:
    the modules of a GPT-2 that every Samba build compiles."""

    def __init__(self, gpt2):
        super().__init__()
        self.wte, self.wpe, self.ln_f = gpt2.transformer.wte, gpt2.transformer.wpe, gpt2.transformer.ln_f

    def forward(self, ids, positions):
        return F.linear(self.ln_f(self.wte(ids) + self.wpe(positions)), self.wte.weight)


def test_gpt2_save_pretrained_weights_give_pytorch_outputs(tmp_path):
    reference, path = saved_gpt2(tmp_path)
    torch.manual_seed(1)  # other values, so only the load can make the outputs agree
    model = EmbeddingHead(transformers.GPT2LMHeadModel(transformers.GPT2Config(**CONFIG)))
    samba.from_torch_model_(model)
    ids_t = torch.randint(0, CONFIG["vocab_size"], (2, 8))
    pos_t = torch.arange(8).repeat(2, 1)
    ids = samba.SambaTensor(ids_t, name="ids")
    pos = samba.SambaTensor(pos_t, name="positions")
    pef = session.compile(model, [ids, pos], name="gpt2_head", pef_path=str(tmp_path / "h.pef"), inference=True)
    session.trace_graph(model, [ids, pos], pef_path=pef, init_output_grads=False)

    # The file names its tensors "transformer.wte.weight", ...; the block's
    # tensors have no target here, so the load is not strict.
    with pytest.raises(samba.SambaError, match="transformer.h.0"):
        session.load_safetensors(path, name_map={"transformer.": ""})
    session.load_safetensors(path, name_map={"transformer.": ""}, strict=False)
    (logits,) = session.run([ids, pos], section_types=["fwd"])
    with torch.no_grad():
        t = reference.transformer
        want = F.linear(t.ln_f(t.wte(ids_t) + t.wpe(pos_t)), t.wte.weight)
    np.testing.assert_allclose(np.array(logits.numpy()), want.numpy(), rtol=1e-5, atol=1e-5)


def test_gpt2_full_model_loads_strictly_and_matches(tmp_path):
    reference, path = saved_gpt2(tmp_path)
    torch.manual_seed(1)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**CONFIG)).eval()
    samba.from_torch_model_(model)

    class Logits(nn.Module):
        def __init__(self):
            super().__init__()
            self.gpt2 = model

        def forward(self, ids):
            return self.gpt2(ids).logits

    ids_t = torch.randint(0, CONFIG["vocab_size"], (2, 8))
    ids = samba.SambaTensor(ids_t, name="ids")
    try:
        pef = session.compile(Logits(), [ids], name="gpt2", pef_path=str(tmp_path / "g.pef"), inference=True)
    except samba.SambaError as e:
        pytest.skip(f"this build does not compile the whole GPT-2 yet: {str(e)[:200]}")
    session.trace_graph(Logits(), [ids], pef_path=pef, init_output_grads=False)
    # GPT-2's causal-mask buffers are not persistent: torch's state_dict, and
    # so save_pretrained, leaves them out. Strict over the parameters, as
    # load_state_dict is over what state_dict holds.
    session.load_safetensors(path, what=("parameters",))
    (logits,) = session.run([ids], section_types=["fwd"])
    with torch.no_grad():
        want = reference(ids_t).logits
    np.testing.assert_allclose(np.array(logits.numpy()), want.numpy(), rtol=1e-4, atol=1e-4)
