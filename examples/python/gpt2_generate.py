"""Greedy GPT-2 text generation the way SambaFlow language-model apps run it:
one multigraph PEF with two graphs that share the model's weights and a
key/value cache in device memory.

  prompt  (cache generation)  runs the whole prompt, writes every layer's keys
                              and values into the cache, returns the first
                              new token;
  token   (token generation)  takes one token and its position, writes that
                              position of the cache, attends over the cache
                              and returns the next token.

Shapes are static, so the cache holds max-positions entries per layer and a
graph writes it at the current position (a one-hot masked update); positions
not yet written are masked out of the attention. The weights are those of a
`transformers.GPT2LMHeadModel`: random from a small config, or
`from_pretrained` of a local directory (--model-dir; --save-model-dir writes
the random model there first). Nothing is downloaded.

    export SAMBA_LIBRARY=$PWD/build/libsamba.so PYTHONPATH=$PWD/bindings/python
    python3 examples/python/gpt2_generate.py --prompt 11,7,42 --max-new-tokens 32 [--compare]

prints the prompt and the generated token ids; --compare also runs
`transformers`' generate(do_sample=False) on PyTorch and fails when the
tokens differ.
"""
import argparse
import os
import sys
import tempfile

import torch
import torch.nn as nn
import transformers

import sambaflow.samba as samba


class CachedGPT2(nn.Module):
    """GPT-2's forward over a fixed-size key/value cache, with the weights
    (and embedding, norm and MLP modules) of a GPT2LMHeadModel. forward_prompt
    and forward_token are the two graphs; the cache buffers belong to this
    module, so both graphs are given the same device tensors."""

    def __init__(self, lm, batch_size, max_positions):
        super().__init__()
        cfg = lm.config
        if cfg.scale_attn_by_inverse_layer_idx or cfg.reorder_and_upcast_attn:
            raise ValueError("GPT-2 configs with scale_attn_by_inverse_layer_idx or reorder_and_upcast_attn are not "
                             "supported by this example's attention")
        if max_positions > cfg.n_positions:
            raise ValueError(f"max positions {max_positions} exceed the model's n_positions {cfg.n_positions}")
        self.lm = lm.eval()
        self.heads, self.head_dim = cfg.n_head, cfg.n_embd // cfg.n_head
        self.max_positions = max_positions
        shape = (batch_size, self.heads, max_positions, self.head_dim)
        for i in range(cfg.n_layer):
            self.register_buffer(f"key_cache_{i}", torch.zeros(shape))
            self.register_buffer(f"value_cache_{i}", torch.zeros(shape))

    def caches(self, layer):
        return getattr(self, f"key_cache_{layer}"), getattr(self, f"value_cache_{layer}")

    def split_heads(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def attend(self, q, keys, values, visible):
        """softmax(q k^T / sqrt(d)) v over the key positions `visible` allows,
        masked with the dtype's minimum as GPT2Attention masks."""
        scores = torch.matmul(q, keys.transpose(-1, -2)) / (self.head_dim ** 0.5)
        scores = torch.where(visible, scores, torch.finfo(scores.dtype).min)
        out = torch.matmul(torch.softmax(scores, dim=-1), values)
        b, _, t, _ = out.shape
        return out.permute(0, 2, 1, 3).reshape(b, t, self.heads * self.head_dim)

    def layers(self, hidden, attention):
        """The transformer blocks; attention(layer, q, k, v) attends and updates the cache."""
        for i, block in enumerate(self.lm.transformer.h):
            q, k, v = block.attn.c_attn(block.ln_1(hidden)).split(self.heads * self.head_dim, dim=2)
            a = attention(i, self.split_heads(q), self.split_heads(k), self.split_heads(v))
            hidden = hidden + block.attn.c_proj(a)
            hidden = hidden + block.mlp(block.ln_2(hidden))
        logits = self.lm.lm_head(self.lm.transformer.ln_f(hidden[:, -1:, :]))
        return torch.argmax(logits, dim=-1)

    def embed(self, ids, positions):
        t = self.lm.transformer
        return t.wte(ids) + t.wpe(positions)

    def forward_prompt(self, ids):
        """The prompt graph: positions 0..P-1, causal attention within the prompt;
        the cache becomes the prompt's keys and values followed by zeros."""
        length = ids.shape[1]
        positions = torch.arange(length).unsqueeze(0)
        causal = positions.transpose(0, 1) >= positions  # (query, key)

        def attention(layer, q, k, v):
            pad = self.max_positions - length
            for cache, new in zip(self.caches(layer), (k, v)):
                cache.copy_(torch.cat([new, torch.zeros(new.shape[0], self.heads, pad, self.head_dim)], dim=2))
            return self.attend(q, k, v, causal)

        return self.layers(self.embed(ids, positions), attention)

    def forward_token(self, token, position):
        """The token graph: one token at `position` (shape (1, 1)); its keys and
        values go into the cache at that position, and it attends over the
        positions up to it."""
        slots = torch.arange(self.max_positions).unsqueeze(0)  # (1, max positions)
        written = (slots == position).unsqueeze(-1)  # (1, max positions, 1)
        visible = slots <= position  # (1, max positions)

        def attention(layer, q, k, v):
            updated = []
            for cache, new in zip(self.caches(layer), (k, v)):
                full = torch.where(written, new, cache)
                cache.copy_(full)
                updated.append(full)
            return self.attend(q, updated[0], updated[1], visible)

        return self.layers(self.embed(token, position), attention)


def load_model(args):
    if args.model_dir:
        return transformers.GPT2LMHeadModel.from_pretrained(args.model_dir)
    torch.manual_seed(args.seed)
    config = transformers.GPT2Config(n_layer=args.layers, n_embd=args.hidden, n_head=args.heads,
                                     vocab_size=args.vocab_size, n_positions=args.max_positions,
                                     initializer_range=args.init_std)
    model = transformers.GPT2LMHeadModel(config)
    if args.save_model_dir:
        model.save_pretrained(args.save_model_dir)
        model = transformers.GPT2LMHeadModel.from_pretrained(args.save_model_dir)
    return model


class SambaGenerator:
    """The two-graph PEF of a GPT2LMHeadModel, compiled and loaded in a session
    of its own (num_threads: its thread pool's size, 0 for one per hardware
    thread): start() runs the prompt graph, step() the token graph. The
    model's weights become SambaTensors (from_torch_model_, in place). Every
    prompt of a batch has prompt_length tokens: there is no padding."""

    def __init__(self, lm, batch_size, prompt_length, max_positions, pef_path, num_threads=0):
        self.model = CachedGPT2(lm, batch_size, max_positions)
        samba.from_torch_model_(self.model)
        self.prompt_length = prompt_length
        self.session = samba.SambaSession(num_threads=num_threads)
        self.prompt_ids = samba.from_torch_tensor(torch.zeros(batch_size, prompt_length, dtype=torch.long),
                                                  name="prompt_ids")
        self.token = samba.from_torch_tensor(torch.zeros(batch_size, 1, dtype=torch.long), name="token")
        self.position = samba.from_torch_tensor(torch.zeros(1, 1, dtype=torch.long), name="position")
        # The graphs share the weights and the cache by being given the same
        # tensors (the model's); the compiler refuses same-named different ones.
        prompt_graph = samba.SambaGraph("prompt", self.model.forward_prompt, (self.prompt_ids,), inference=True)
        token_graph = samba.SambaGraph("token", self.model.forward_token, (self.token, self.position),
                                       inference=True)
        self.session.add_graph(prompt_graph)
        self.session.add_graph(token_graph)
        self.pef = self.session.compile_multigraph("gpt2_generate", pef_path=pef_path)
        self.session.init_multigraph_runtime(self.pef)
        self.session.trace_multigraph(prompt_graph)
        self.session.trace_multigraph(token_graph)

    def start(self, prompt):
        """Runs the prompt (batch, prompt_length) and fills the cache; returns the first new tokens (batch, 1)."""
        self.prompt_ids.copy_(prompt)
        [first] = self.session.run([self.prompt_ids], graph_name="prompt")
        return samba.to_torch(first).clone()

    def step(self, tokens, position):
        """Runs tokens (batch, 1) at `position`; returns the next tokens (batch, 1)."""
        self.token.copy_(tokens)
        self.position.copy_(torch.full((1, 1), position, dtype=torch.long))
        [after] = self.session.run([self.token, self.position], graph_name="token")
        return samba.to_torch(after).clone()

    def generate(self, prompt, max_new_tokens):
        """Greedy generation: the new tokens, (batch, at most max_new_tokens).
        As transformers does, a sequence that emitted the end-of-text token
        continues with it (the pad token here), and generation stops when
        every sequence has."""
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        eos = self.model.lm.config.eos_token_id
        tokens = [self.start(prompt)]
        finished = tokens[-1] == eos
        for position in range(self.prompt_length, self.prompt_length + max_new_tokens - 1):
            if bool(finished.all()):
                break
            after = torch.where(finished, torch.full_like(tokens[-1], eos), self.step(tokens[-1], position))
            finished |= after == eos
            tokens.append(after)
        return torch.cat(tokens, dim=1)


def generate(lm, prompt, max_new_tokens, pef_path):
    """Greedy generation on Samba with a cache just long enough; (batch, max_new_tokens)."""
    batch, length = prompt.shape
    generator = SambaGenerator(lm, batch, length, length + max_new_tokens, pef_path)
    return generator.generate(prompt, max_new_tokens)


def reference(lm, prompt, max_new_tokens):
    """transformers' greedy generate on PyTorch: the new tokens only."""
    with torch.no_grad():
        out = lm.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                          max_new_tokens=max_new_tokens, pad_token_id=lm.config.eos_token_id)
    return out[:, prompt.shape[1]:]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompt", default="11,7,42,5",
                   help="prompt token ids, comma-separated; several prompts of one length (a batch) are "
                   "separated by ';' (default: %(default)s)")
    p.add_argument("--max-new-tokens", type=int, default=32, help="tokens to generate (default: %(default)s)")
    p.add_argument("--model-dir", help="load the model with from_pretrained from this local directory")
    p.add_argument("--save-model-dir", help="save the random model here (save_pretrained) and load it back")
    p.add_argument("--layers", type=int, default=2, help="random model: layers (default: %(default)s)")
    p.add_argument("--hidden", type=int, default=64, help="random model: hidden size (default: %(default)s)")
    p.add_argument("--heads", type=int, default=4, help="random model: attention heads (default: %(default)s)")
    p.add_argument("--vocab-size", type=int, default=1000, help="random model: vocabulary (default: %(default)s)")
    p.add_argument("--max-positions", type=int, default=128, help="random model: n_positions (default: %(default)s)")
    p.add_argument("--init-std", type=float, default=0.2,
                   help="random model: weights' standard deviation; GPT-2's 0.02 makes a random model repeat "
                   "its last token whatever the context (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="random model: torch seed (default: %(default)s)")
    p.add_argument("--pef", help="where to write the PEF (default: a temporary directory)")
    p.add_argument("--compare", action="store_true", help="also generate with transformers on PyTorch; "
                   "exit 1 when the tokens differ")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    lm = load_model(args).eval()
    prompt = torch.tensor([[int(t) for t in p.split(",")] for p in args.prompt.split(";")], dtype=torch.long)
    want = reference(lm, prompt, args.max_new_tokens) if args.compare else None
    with tempfile.TemporaryDirectory() as tmp:
        got = generate(lm, prompt, args.max_new_tokens, args.pef or os.path.join(tmp, "gpt2_generate.pef"))
    for i in range(prompt.shape[0]):
        print("prompt:", " ".join(map(str, prompt[i].tolist())))
        print("generated:", " ".join(map(str, got[i].tolist())))
        if want is not None:
            print("transformers:", " ".join(map(str, want[i].tolist())))
    if want is not None and not torch.equal(got, want):
        print("the tokens differ from transformers' generate", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
