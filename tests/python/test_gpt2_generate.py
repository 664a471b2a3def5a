"""Language-model inference as SambaFlow apps run it: examples/python/gpt2_generate.py
generates greedily from a two-graph PEF (prompt graph, one-token graph) that
shares GPT-2's weights and KV cache in device memory, and emits exactly the
tokens of transformers' generate(do_sample=False) on PyTorch.

Needs transformers: ctest runs this file in the venv scripts/setup_python_env.sh
makes (python.gpt2_generate)."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", reason="transformers is installed by scripts/setup_python_env.sh")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
APP = os.path.join(ROOT, "examples", "python", "gpt2_generate.py")
PROMPT = [11, 7, 42, 5, 300]
NEW_TOKENS = 32


def saved_model(path, seed=0, eos_token_id=None):
    """A small random GPT-2 (2 layers, hidden 64) written with save_pretrained.
    Weights wider than GPT-2's initializer_range so that the next token
    depends on the context: at 0.02 a random GPT-2 repeats its last token,
    which a broken cache would reproduce too."""
    torch.manual_seed(seed)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_positions=64,
                                     initializer_range=0.3, **({} if eos_token_id is None else
                                                                {"eos_token_id": eos_token_id}))
    transformers.GPT2LMHeadModel(config).save_pretrained(path)
    return path


def pytorch_tokens(model_dir, prompt):
    lm = transformers.GPT2LMHeadModel.from_pretrained(model_dir).eval()
    ids = torch.tensor(prompt, dtype=torch.long)
    with torch.no_grad():
        out = lm.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=NEW_TOKENS,
                          pad_token_id=lm.config.eos_token_id)
    return out[:, ids.shape[1]:].tolist()


def app(*argv):
    r = subprocess.run([sys.executable, APP, *argv], capture_output=True, text=True, env=os.environ.copy())
    assert r.returncode == 0, f"{argv}: {r.stdout}\n{r.stderr}"
    return r.stdout


def generated(stdout):
    return [[int(t) for t in line.split(":", 1)[1].split()] for line in stdout.splitlines()
            if line.startswith("generated")]


def test_example_emits_pytorchs_tokens_for_a_locally_saved_model(tmp_path):
    model_dir = saved_model(str(tmp_path / "gpt2"))
    want = pytorch_tokens(model_dir, [PROMPT])
    assert len(set(want[0])) > 4, f"the reference does not depend on its context: {want}"
    out = app("--model-dir", model_dir, "--prompt", ",".join(map(str, PROMPT)),
              "--max-new-tokens", str(NEW_TOKENS), "--pef", str(tmp_path / "gen.pef"))
    assert generated(out) == want
    assert os.path.exists(tmp_path / "gen.pef")


def test_a_batch_of_prompts_shares_one_pef(tmp_path):
    model_dir = saved_model(str(tmp_path / "gpt2"), seed=1)
    prompts = [PROMPT, [9, 9, 120, 4, 77]]
    want = pytorch_tokens(model_dir, prompts)
    out = app("--model-dir", model_dir, "--prompt", ";".join(",".join(map(str, p)) for p in prompts),
              "--max-new-tokens", str(NEW_TOKENS))
    assert generated(out) == want


def test_generation_stops_at_the_end_of_text_token_as_transformers_does(tmp_path):
    """The first prompt's 6th token is made the end-of-text token: that
    sequence continues with padding while the other one goes on."""
    prompts = [PROMPT, [9, 9, 120, 4, 77]]
    eos = pytorch_tokens(saved_model(str(tmp_path / "plain"), seed=1), prompts)[0][5]
    model_dir = saved_model(str(tmp_path / "gpt2"), seed=1, eos_token_id=eos)
    want = pytorch_tokens(model_dir, prompts)
    assert want[0][5:] == [eos] * (len(want[0]) - 5)
    out = app("--model-dir", model_dir, "--prompt", ";".join(",".join(map(str, p)) for p in prompts),
              "--max-new-tokens", str(NEW_TOKENS))
    assert generated(out) == want


def test_the_token_graph_reads_the_cache_the_prompt_graph_wrote(tmp_path):
    """Generation continues from the cache in device memory: putting the
    host's zeros back into it between the prompt graph and the token graph
    changes every token after the first."""
    sys.path.insert(0, os.path.dirname(APP))
    try:
        import gpt2_generate
    finally:
        sys.path.pop(0)
    model_dir = saved_model(str(tmp_path / "gpt2"))
    want = pytorch_tokens(model_dir, [PROMPT])[0]
    lm = transformers.GPT2LMHeadModel.from_pretrained(model_dir).eval()
    generator = gpt2_generate.SambaGenerator(lm, 1, len(PROMPT), len(PROMPT) + NEW_TOKENS, str(tmp_path / "g.pef"))
    assert generator.generate(torch.tensor([PROMPT]), NEW_TOKENS)[0].tolist() == want

    first = generator.start(torch.tensor([PROMPT]))
    assert first.item() == want[0]
    generator.session.sync_buffers_to_rdu()  # the caches' host values: zeros
    assert generator.step(first, len(PROMPT)).item() != want[1]
    # A new prompt starts over: the prompt graph rewrites the whole cache.
    assert generator.generate(torch.tensor([PROMPT]), NEW_TOKENS)[0].tolist() == want
