"""One rank of the data-parallel tests (tests/mpi/test_data_parallel.py),
launched by mpirun or alone. A small classifier (Linear 8->16, tanh, Linear
16->4, cross-entropy) with SGD; each command writes what the test checks
to OUT/<what>.rank<r>.json.

    dp_worker.py compile PEF [--data-parallel -ws N] [--batch B]
    dp_worker.py init PEF OUT          rank-dependent random (or --lazy) init, dumped after trace_graph
    dp_worker.py raise PEF             rank 1 raises inside use_abexit; the others keep stepping
    dp_worker.py kill PEF              rank 1 SIGKILLs itself while stepping; the others keep stepping
    dp_worker.py train PEF OUT         a few data-parallel steps; rank 0 saves a checkpoint and infers
    dp_worker.py infer PEF OUT CKPT    a plain process: loads the checkpoint and infers
    dp_worker.py step PEF              one data-parallel step (bad-input cases)
"""
import argparse
import json
import os
import signal
import sys
import threading

import numpy as np
import torch
import torch.nn as nn

import sambaflow.samba as samba
import sambaflow.samba.optim
import sambaflow.samba.utils as utils
from sambaflow.samba import distributed
from sambaflow.samba.sambaloader import SambaLoader

FEATURES, HIDDEN, CLASSES = 8, 16, 4


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, CLASSES)
        self.criterion = nn.CrossEntropyLoss()

    def forward(self, x, y):
        logits = self.fc2(torch.tanh(self.fc1(x)))
        return self.criterion(logits, y), logits


def data(batch, step, rank):
    """Batch `step` of this rank: fixed values, different per rank and step."""
    g = np.random.default_rng(1000 * step + rank)
    x = g.standard_normal((batch, FEATURES)).astype(np.float32)
    y = g.integers(0, CLASSES, batch).astype(np.int64)
    return (samba.from_torch_tensor(torch.from_numpy(x), name="x"),
            samba.from_torch_tensor(torch.from_numpy(y), name="y"))


def build(args, seed=0, lazy_seed=None):
    if lazy_seed is not None:
        samba.session.enable_lazy_param(seed=lazy_seed)
    torch.manual_seed(seed)
    model = Classifier()
    samba.from_torch_model_(model)
    optim = sambaflow.samba.optim.SGD(model.parameters(), lr=0.1)
    return model, optim, data(args.batch, 0, 0)


def load(args, seed=0, lazy_seed=None):
    model, optim, inputs = build(args, seed, lazy_seed)
    utils.trace_graph(model, inputs, optim, pef=args.pef)
    return model


def step(model, args, i, **run_args):
    x, y = data(args.batch, i, utils.get_rank())
    return samba.session.run([x, y], model.output_tensors, hyperparam_dict={"lr": 0.1}, data_parallel=True,
                             reduce_on_rdu=True, **run_args)


def weights(model):
    names = samba.session.get_weight_names()
    return {n: samba.to_torch(t).double().flatten().tolist()
            for n, t in zip(names, samba.session.get_tensors_by_name(names))}


def dump(out, what, value):
    with open(os.path.join(out, f"{what}.rank{utils.get_rank()}.json"), "w") as f:
        json.dump(value, f)


def cmd_compile(args):
    model, optim, inputs = build(args)
    samba.session.compile(model, inputs, optim, name="classifier", pef_path=args.pef, loss_indices=[0],
                          data_parallel=args.data_parallel, world_size=args.world_size)


def cmd_init(args):
    rank = utils.get_rank()
    model = load(args, seed=rank, lazy_seed=(100 + rank) if args.lazy else None)
    dump(args.out, "init", weights(model))
    # The loader's share of a shuffled epoch of 10 batches: ids of the first sample of each.
    batches = [(torch.full((2, 1), float(b)), torch.zeros(2, dtype=torch.int64)) for b in range(10)]
    loader = SambaLoader(batches, ["a", "b"], shuffle=True, seed=5)
    dump(args.out, "loader", [int(samba.to_torch(a).flatten()[0]) for a, _ in loader])


def _train_until_rank_1_fails(args, fault):
    """Every rank steps forever under use_abexit; rank 1 calls fault() after its second step."""
    distributed.set_timeout(args.timeout)

    def main():
        model = load(args)
        step(model, args, 0)
        # The test checks this line: the fault happened while the job was training.
        print(f"rank {utils.get_rank()}: training", flush=True)
        # Step 1's all-reduce completes only once every rank has printed the
        # line above, so the fault cannot end the job before a rank says it.
        step(model, args, 1)
        if utils.get_rank() == 1:
            fault()
        for i in range(2, 1 << 30):
            step(model, args, i)

    samba.session.atexit_register(lambda: print(f"rank {utils.get_rank()}: exit handler ran", flush=True))
    samba.session.use_abexit(main)


def _raise():
    raise ValueError("the data of rank 1 is corrupt")


def _kill_soon():
    # Killed from another thread while the main thread is inside a step.
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()


def cmd_raise(args):
    _train_until_rank_1_fails(args, _raise)


def cmd_kill(args):
    _train_until_rank_1_fails(args, _kill_soon)


def cmd_train(args):
    model = load(args)
    losses = [step(model, args, i)[0].item() for i in range(args.steps)]
    if utils.get_rank() == 0:
        samba.session.save_checkpoint(args.checkpoint, what=("parameters",))
    x, y = data(args.batch, 99, 0)
    logits = samba.session.run([x, y], model.output_tensors, section_types=["fwd"], train=False)[1]
    result = {"losses": losses, "weights": weights(model), "logits": samba.to_torch(logits).flatten().tolist()}
    # Each rank's own batch, its logits gathered to rank 0.
    x, y = data(args.batch, 98, utils.get_rank())
    samba.session.run([x, y], model.output_tensors, section_types=["fwd"], train=False)
    own = samba.session.get_tensors([model.output_tensors[1]])[0]
    gathered = samba.session.get_tensors([model.output_tensors[1]], gather=True)[0]
    result["own_logits"] = samba.to_torch(own).tolist()
    result["gathered_logits"] = None if gathered is None else samba.to_torch(gathered).tolist()
    # Last: measuring trains on.
    result["perf"] = utils.measure_performance(model, [x, y], n_iterations=3, warmup=1, data_parallel=True)
    dump(args.out, "train", result)


def cmd_infer(args):
    model = load(args)
    samba.session.load_checkpoint(args.checkpoint, what=("parameters",))
    x, y = data(args.batch, 99, 0)
    logits = samba.session.run([x, y], model.output_tensors, section_types=["fwd"], train=False)[1]
    dump(args.out, "infer", {"weights": weights(model), "logits": samba.to_torch(logits).flatten().tolist()})


def cmd_step(args):
    model = load(args)
    step(model, args, 0)


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=("compile", "init", "raise", "kill", "train", "infer", "step"))
    ap.add_argument("pef")
    ap.add_argument("out", nargs="?", default=".")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--data-parallel", action="store_true")
    ap.add_argument("-ws", "--world-size", type=int, default=None)
    ap.add_argument("--lazy", action="store_true")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--checkpoint", default="model.ckpt")
    ap.add_argument("--timeout", type=float, default=5.0)
    args = ap.parse_args(argv)
    globals()[f"cmd_{args.command}"](args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
