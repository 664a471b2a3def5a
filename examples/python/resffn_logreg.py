"""ResFFNLogReg: the sample app of the SambaFlow modeling guide, on Samba.

The model class, the inputs, the optimizer, the compile / run split and the
training loop are written as the guide writes them, imports included
(the package is sambaflow.samba, as in SambaFlow). It trains on the
digits data set (examples/data/digits.csv.gz) with the same split, order
and initial weights as the C example (examples/c/resffn_logreg.c), so the
per-step losses of the two agree.

    python3 resffn_logreg.py compile -b 64 -p out/resffn.pef
    python3 resffn_logreg.py run -b 64 -p out/resffn.pef [--epochs 30] [--host-loss]
    python3 resffn_logreg.py measure-performance -b 64 -p out/resffn.pef
    python3 resffn_logreg.py compile -b 64 --inference -p out/resffn_inf.pef
    python3 resffn_logreg.py compile -b 64 --mixed-precision bf16 -p out/resffn_bf16.pef

run trains (or, with --host-loss, runs FWD on the device, computes the loss
in PyTorch on the host and feeds its gradient back with grad_of_outputs),
then reports the held-out accuracy; --min-accuracy makes a lower one fail.
"""
import json
import math
import os
import sys
from typing import Tuple

import torch
import torch.nn as nn

import sambaflow  # noqa: F401 - the guide spells the optimizer sambaflow.samba.optim.SGD
import sambaflow.samba as samba
import sambaflow.samba.utils as utils
from sambaflow.samba.sambaloader import SambaLoader
from sambaflow.samba.utils.common import common_app_driver, parse_app_args

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import digits  # noqa: E402 - the data set helpers next to this file

# The initial weights come from the C example's generator, drawn in module
# order (gemm1, gemm2, gemm3), so both apps start from the same values.
_init_rng = digits.DigitsRng(0x5EEDF00D)


def basic_weight_init(module: nn.Module) -> None:
    """nn.Linear's default bounds (uniform in +-1/sqrt(fan_in)) for weight and
    bias, drawn from the shared generator; LayerNorm: weight 1, bias 0."""
    if isinstance(module, nn.Linear):
        fan_in = math.sqrt(module.in_features)
        with torch.no_grad():
            for p in (module.weight, module.bias):
                values = [(2 * _init_rng.uniform() - 1) / fan_in for _ in range(p.numel())]
                p.copy_(torch.tensor(values, dtype=torch.float64).reshape(p.shape))
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class ResFFNLogReg(nn.Module):
    """Feed Forward Network with two different activation functions and a residual connection"""
    def __init__(self, num_features: int, hidden_size: int, num_classes: int) -> None:
        super().__init__()
        self.gemm1 = nn.Linear(num_features, hidden_size, bias=True)
        self.gemm2 = nn.Linear(hidden_size, hidden_size, bias=True)
        self.gemm3 = nn.Linear(hidden_size, num_classes, bias=True)

        self.norm1 = nn.LayerNorm(hidden_size)
        self.norm2 = nn.LayerNorm(hidden_size)

        self.tanh1 = nn.Tanh()
        self.sigmoid1 = nn.Sigmoid()

        self.criterion = nn.CrossEntropyLoss()

        self.apply(basic_weight_init)

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor) -> Tuple[torch.Tensor]:
        out = self.gemm1(inputs)
        out = self.norm1(out)
        out = self.tanh1(out)
        residual = out
        out = self.gemm2(out)
        out = self.norm2(out)
        out = out + residual
        out = self.sigmoid1(out)
        out = self.gemm3(out)
        loss = self.criterion(out, targets)
        return loss, out


def add_args(parser):
    parser.add_argument("--num-features", type=int, default=digits.FEATURES)
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--num-classes", type=int, default=digits.CLASSES)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=1e-4)


def add_run_args(parser):
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--steps", type=int, default=0, help="stop training after this many steps")
    parser.add_argument("--data", default=os.path.join(here, "..", "data", "digits.csv.gz"))
    parser.add_argument("--host-loss", action="store_true",
                        help="the loss on the host in PyTorch, its gradient fed back with grad_of_outputs")
    parser.add_argument("--min-accuracy", type=float, default=0.0)
    parser.add_argument("--dump-losses", default=None, help="write each step's lr and loss as JSON lines")


def lr_schedule(base_lr, epoch, epochs):
    """Cosine decay per epoch, as the C example's."""
    return base_lr * 0.5 * (1 + math.cos(math.pi * (epoch - 1) / epochs))


def batches(pixels, labels, rows, batch_size):
    """The data loader: whole batches of (image, label) torch tensors, in order."""
    for start in range(0, len(rows) - batch_size + 1, batch_size):
        take = rows[start:start + batch_size]
        yield torch.from_numpy(pixels[take]), torch.from_numpy(labels[take])


def train(args, model):
    pixels, labels = digits.load(args.data)
    train_rows, _ = digits.split(len(labels))
    order = digits.DigitsRng(0xC0FFEE)
    traced_outputs = model.output_tensors
    criterion = nn.CrossEntropyLoss()
    dump = open(args.dump_losses, "w") if args.dump_losses else None
    step = 0
    for epoch in range(1, args.epochs + 1):
        new_lr = lr_schedule(args.lr, epoch, args.epochs)
        hyperparam_dict = {'lr': new_lr, 'weight_decay': args.weight_decay}
        order.shuffle(train_rows)
        samba_loader = SambaLoader(batches(pixels, labels, train_rows, args.batch_size), ["image", "label"])
        total, seen = 0.0, 0
        for X_val, Y_val in samba_loader:
            if args.host_loss:
                partial_output = samba.session.run(input_tensors=[X_val, Y_val],
                                                   output_tensors=traced_outputs,
                                                   hyperparam_dict=hyperparam_dict,
                                                   section_types=['fwd'])[1]
                # Make PyTorch return the grads
                partial_output = samba.to_torch(partial_output)
                partial_output.requires_grad = True
                loss = criterion(partial_output, samba.to_torch(Y_val))
                loss.backward()
                samba.session.run(input_tensors=[X_val, Y_val],
                                  output_tensors=traced_outputs,
                                  grad_of_outputs=(samba.from_torch_tensor(torch.zeros(())),
                                                   samba.from_torch_tensor(partial_output.grad)),
                                  section_types=['bckwd', 'opt'])
                value = loss.item()
            else:
                loss, out = samba.session.run(input_tensors=[X_val, Y_val],
                                              output_tensors=traced_outputs,
                                              hyperparam_dict=hyperparam_dict)
                value = loss.item()
            if dump:
                dump.write(json.dumps({"lr": new_lr, "loss": value}) + "\n")
            total, seen, step = total + value, seen + 1, step + 1
            if args.steps and step >= args.steps:
                break
        print(f"epoch {epoch}/{args.epochs}: lr {new_lr:.4f}, mean loss {total / max(1, seen):.4f}")
        if args.steps and step >= args.steps:
            break
    if dump:
        dump.close()


def evaluate(args, model):
    """Held-out accuracy from FWD runs in evaluation mode (a short last batch is padded)."""
    pixels, labels = digits.load(args.data)
    _, test_rows = digits.split(len(labels))
    traced_outputs = model.output_tensors
    correct = 0
    for start in range(0, len(test_rows), args.batch_size):
        rows = test_rows[start:start + args.batch_size]
        padded = rows + [rows[0]] * (args.batch_size - len(rows))
        image = samba.from_torch_tensor(torch.from_numpy(pixels[padded]), name="image")
        label = samba.from_torch_tensor(torch.from_numpy(labels[padded]), name="label")
        logits = samba.session.run(input_tensors=[image, label], output_tensors=traced_outputs,
                                   section_types=['fwd'], train=False)[1]
        predicted = samba.to_torch(logits).argmax(dim=1)[:len(rows)]
        correct += int((predicted == torch.from_numpy(labels[rows])).sum())
    return correct / len(test_rows)


def main(argv):
    args = parse_app_args(argv=argv, common_parser_fn=add_args, run_parser_fn=add_run_args)

    #Input definition
    image = samba.randn(args.batch_size, args.num_features, name='image', batch_dim=0)
    label = samba.randint(args.num_classes, (args.batch_size, ), name='label', batch_dim=0)
    inputs = (image, label)

    # Model definition
    model = ResFFNLogReg(args.num_features, args.hidden_size, args.num_classes)
    samba.from_torch_model_(model)

    # Optimizer definition
    optim = sambaflow.samba.optim.SGD(model.parameters(),
                                      lr=args.lr,
                                      momentum=args.momentum,
                                      weight_decay=args.weight_decay)

    # Different run modes
    # The common_app_driver() handles model compilation and various other tasks, e.g.,
    # measure-performance. Running, or training, a model must be explicitly carried out
    if args.command == "run":
        # Trace the graph
        utils.trace_graph(model, inputs, optim, pef=args.pef, mapping=args.mapping)
        # Within the user defined train function, call: samba.session.run
        if not args.inference:
            train(args, model)
        accuracy = evaluate(args, model)
        print(f"held-out accuracy: {100 * accuracy:.1f}%")
        if accuracy < args.min_accuracy:
            print(f"held-out accuracy {accuracy:.3f} is below the required {args.min_accuracy}", file=sys.stderr)
            return 1
    else:
        common_app_driver(args=args,
                          model=model,
                          inputs=inputs,
                          optim=optim,
                          name=model.__class__.__name__,
                          init_output_grads=not args.inference,
                          app_dir=utils.get_file_dir(__file__))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
