"""Replays the training steps of the ResFFNLogReg example in plain PyTorch.

resffn_logreg run --steps N --dump FILE writes the initial weights and, for
each step, the rows of the digits data set it trained on, the learning rate
and the loss Samba computed. This script builds the same model in PyTorch
(nn.Linear, nn.LayerNorm, tanh, the residual add, sigmoid, cross-entropy),
loads the same weights, takes the same SGD steps (momentum, weight decay)
on the same batches, and checks that every loss agrees within the
tolerance.

    python3 torch_reference.py DUMP.jsonl DIGITS.csv.gz [--tolerance 1e-4]

Exit status: 0 when the losses agree, 1 when they do not, 77 (skipped) when
PyTorch is not installed.
"""
import argparse
import gzip
import json
import sys


def load_digits(path):
    opener = gzip.open if path.endswith(".gz") else open
    pixels, labels = [], []
    with opener(path, "rt") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            values = [int(v) for v in line.split(",")]
            pixels.append([v / 16.0 for v in values[:64]])
            labels.append(values[64])
    return pixels, labels


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dump")
    parser.add_argument("data")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("torch_reference: skipped: PyTorch is not installed (Debian: python3-torch)")
        return 77

    with open(args.dump) as f:
        records = [json.loads(line) for line in f]
    config, params, steps = records[0], {}, []
    for r in records[1:]:
        if "param" in r:
            params[r["param"]] = r["values"]
        else:
            steps.append(r)
    hidden = config["hidden"]

    class ResFFNLogReg(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gemm1 = torch.nn.Linear(64, hidden)
            self.gemm2 = torch.nn.Linear(hidden, hidden)
            self.gemm3 = torch.nn.Linear(hidden, 10)
            self.norm1 = torch.nn.LayerNorm(hidden)
            self.norm2 = torch.nn.LayerNorm(hidden)
            self.criterion = torch.nn.CrossEntropyLoss()

        def forward(self, x, y):
            out = torch.tanh(self.norm1(self.gemm1(x)))
            residual = out
            out = self.norm2(self.gemm2(out)) + residual
            out = self.gemm3(torch.sigmoid(out))
            return self.criterion(out, y), out

    torch.manual_seed(0)
    model = ResFFNLogReg()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.tensor(params[name], dtype=torch.float32).reshape(p.shape))
    optim = torch.optim.SGD(model.parameters(), lr=steps[0]["lr"], momentum=config["momentum"],
                            weight_decay=config["weight_decay"])
    pixels, labels = load_digits(args.data)
    x_all = torch.tensor(pixels, dtype=torch.float32)
    y_all = torch.tensor(labels, dtype=torch.int64)

    worst = 0.0
    for i, step in enumerate(steps):
        rows = torch.tensor(step["rows"], dtype=torch.int64)
        for g in optim.param_groups:
            g["lr"] = step["lr"]
        optim.zero_grad()
        loss, _ = model(x_all[rows], y_all[rows])
        loss.backward()
        optim.step()
        diff = abs(loss.item() - step["loss"])
        worst = max(worst, diff)
        print(f"step {i + 1:2d}: torch {loss.item():.7f}  samba {step['loss']:.7f}  |diff| {diff:.2e}")
    ok = worst <= args.tolerance
    print(f"torch_reference: {len(steps)} steps, largest loss difference {worst:.2e} "
          f"({'within' if ok else 'OVER'} the tolerance {args.tolerance:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
