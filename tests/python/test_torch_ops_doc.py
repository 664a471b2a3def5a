"""docs/torch_ops.md is what scripts/gen_torch_ops.py generates from the
front end's tables today: adding a mapping or a registry op without
regenerating it fails here."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def test_committed_torch_ops_doc_is_up_to_date():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_torch_ops.py"), "--check"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr + done.stdout


def test_doc_lists_routes_and_the_uncovered():
    with open(os.path.join(ROOT, "docs", "torch_ops.md"), encoding="utf-8") as f:
        text = f.read()
    assert "| `torch.nn.functional.linear` | linear |" in text
    assert "## Not covered" in text and "`torch.svd`" in text.split("## Not covered")[1]
