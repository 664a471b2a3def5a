"""Writes the LibTorch example's two programs from one set of weights: a
TorchScript module (mlp.pt, torch.jit.trace) and a Samba inference PEF
(mlp.pef, weights embedded), both of the same torch.nn.Module.

    SAMBA_LIBRARY=build/libsamba.so PYTHONPATH=bindings/python \\
        python3 examples/torch/make_model.py OUT_DIR [--batch N]
"""
import argparse
import os

import torch

import sambaflow.samba as samba
from sambaflow.samba import session


class MLP(torch.nn.Module):
    """Two linear layers with a tanh between: matmuls, a bias broadcast and
    an elementwise function, the parts of most models' blocks."""

    def __init__(self, features=8, hidden=32, classes=5):
        super().__init__()
        self.fc1 = torch.nn.Linear(features, hidden)
        self.fc2 = torch.nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = MLP().eval()
    example = torch.zeros(args.batch, 8)
    # TorchScript first: from_torch_model_ below turns the parameters into
    # SambaTensors, which the TorchScript tracer does not take.
    torch.jit.trace(model, example).save(os.path.join(args.out_dir, "mlp.pt"))
    samba.from_torch_model_(model)
    x = samba.SambaTensor(example, name="x")
    session.compile(model, [x], name="mlp", pef_path=os.path.join(args.out_dir, "mlp.pef"), inference=True)


if __name__ == "__main__":
    main()
