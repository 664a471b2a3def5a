"""ONNX's backend test suite (onnx.backend.test, onnx 1.12) through the Samba
backend (sambaflow.samba.onnx): the node tests and the simple model tests,
compared with the expected failures kept beside this file.

Usage: onnx_backend_test.py DATA_DIR [--results FILE] [--write-expected]
DATA_DIR holds the suite's data (`node/`, `simple/`), as onnx's
`backend-test-tools generate-data` writes it (run_onnx_backend_tests.sh makes
it). The run fails when a test outside expected_failures.txt fails, or when a
test listed there passes (the list must shrink as the importer grows).
--results writes every test's outcome as JSON (gen_onnx_op_table.py turns it
into docs/onnx.md's per-op table); --write-expected rewrites the list from
this run's failures, each with the reason its error gives."""
import argparse
import functools
import json
import os
import re
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "expected_failures.txt")

# Tests left out of the run, each pattern with the reason.
EXCLUDED = {
    r"_cuda$": "the backend runs on the CPU emulator only",
    r"^test_(bvlc_alexnet|densenet121|inception_v1|inception_v2|resnet50|shufflenet|squeezenet|vgg19|zfnet512)_":
        "real models are downloaded from the network at test time",
}

# Tests that cannot pass whatever the backend does, each pattern with the
# reason --write-expected gives them.
UNREPRODUCIBLE = {
    r"^test_training_dropout(_default)?(_mask)?_cpu$":
        "random: the expected outputs come from numpy's RNG, which Samba's Philox streams do not "
        "reproduce (tests/python/test_onnx_pool_dropout.py checks the semantics)",
}


def load_expected():
    """{test name: reason} from expected_failures.txt (`name  # reason` lines)."""
    expected = {}
    with open(EXPECTED) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition("#")
            expected[name.strip()] = reason.strip()
    return expected


def reason_of(message):
    """A short reason for a failure, from the error the test raised."""
    text = message.strip()
    last = text.splitlines()[-1] if text else "no message"
    detail = re.sub(r"^.*?: samba_onnx_model_(load|forward)(_file)?: ", "", last)
    node = re.search(r"node '[^']*' \((\w+), opset \d+\): (.*)", detail)
    if node and "the op is not supported at this opset" in node.group(2):
        return f"op not implemented: {node.group(1)}"
    if re.search(r"has no Samba dtype|numpy dtype \w+ has no Samba dtype", detail):
        kind = re.search(r"(ONNX data type \d+|numpy dtype \w+)", detail)
        return f"dtype not supported: {kind.group(1) if kind else detail[:80]}"
    if "is not a tensor" in detail:
        return "not supported: sequence or optional values"
    if "operator set domain" in detail:
        return "not supported: " + re.sub(r"^.*(operator set domain '[^']*').*$", r"\1", detail)
    if "older opset whose ops are unchanged" in detail:
        changed = re.search(r"\((\w+)\) (changed at opset \d+|is not an op at both opsets)", detail)
        opset = re.search(r"opset (\d+);", detail)
        return (f"opset {opset.group(1) if opset else '?'} below 13: "
                f"{changed.group(1) + ' ' + changed.group(2) if changed else 'an op changed'}")
    if "must be known at import" in detail:
        return "not supported: a value needed at import comes from an input"
    if node:
        return f"{node.group(1)} not supported: {node.group(2)[:110]}"
    if re.search(r"Mismatched elements|Not equal to tolerance|not almost equal|DESIRED|ACTUAL|\[[-0-9.e, ]+", text):
        return "results differ from the reference"
    return "error: " + detail[:130]


class Recorder(unittest.TextTestResult):
    """Keeps each test's outcome and, for failures, the message."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}

    @staticmethod
    def _name(test):
        return test.id().rsplit(".", 1)[-1]

    def addSuccess(self, test):
        super().addSuccess(test)
        self.outcomes[self._name(test)] = ("pass", "")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.outcomes[self._name(test)] = ("fail", str(err[1]))

    def addError(self, test, err):
        super().addError(test, err)
        self.outcomes[self._name(test)] = ("fail", f"{err[0].__name__}: {err[1]}")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.outcomes[self._name(test)] = ("skip", reason)


def build_suite(data_dir):
    import numpy as np
    # onnx 1.12's test cases use numpy aliases numpy 1.24 removed; they
    # meant the builtins.
    for alias, builtin in (("float", float), ("int", int), ("bool", bool), ("object", object)):
        if not hasattr(np, alias):
            setattr(np, alias, builtin)
    import onnx.backend.test.runner as runner
    from sambaflow.samba import onnx as samba_backend

    # The runner reads the package's data directory, which Debian ships in
    # another package; point it at the data given.
    runner.load_model_tests = functools.partial(runner.load_model_tests, data_dir)
    backend_test = runner.Runner(samba_backend.SambaBackend, __name__)
    for pattern in EXCLUDED:
        backend_test.exclude(pattern)
    return backend_test


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir")
    parser.add_argument("--results", help="write every test's outcome here (JSON)")
    parser.add_argument("--write-expected", action="store_true",
                        help="rewrite expected_failures.txt from this run's failures")
    parser.add_argument("-k", help="run only tests whose name matches this regex")
    args = parser.parse_args()

    backend_test = build_suite(args.data_dir)
    if args.k:
        backend_test.include(args.k)
    suite = unittest.TestSuite()
    for case in backend_test.test_cases.values():
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    start = time.monotonic()
    with open(os.devnull, "w") as quiet:
        result = unittest.TextTestRunner(stream=quiet, resultclass=Recorder, verbosity=0).run(suite)
    seconds = time.monotonic() - start
    outcomes = result.outcomes

    # A test's kind, for the report: the runner's class names them.
    kinds = {}
    for case in backend_test.test_cases.values():
        kind = "node" if "Node" in case.__name__ else "simple" if "Simple" in case.__name__ else "other"
        for name in unittest.defaultTestLoader.getTestCaseNames(case):
            kinds[name] = kind

    if args.write_expected:
        failed = sorted(n for n, (o, _) in outcomes.items() if o == "fail")
        with open(EXPECTED, "w") as f:
            f.write("# ONNX backend tests expected to fail through the Samba backend, each with why.\n"
                    "# Written by onnx_backend_test.py --write-expected; a test that starts passing\n"
                    "# must leave the list (the run fails on it).\n")
            for name in failed:
                reason = next((why for pattern, why in UNREPRODUCIBLE.items() if re.search(pattern, name)),
                              None) or reason_of(outcomes[name][1])
                f.write(f"{name}  # {reason}\n")
    expected = load_expected()

    unexpected = [n for n, (o, _) in outcomes.items() if o == "fail" and n not in expected]
    stale = [n for n, (o, _) in outcomes.items() if o == "pass" and n in expected]
    for kind in ("node", "simple"):
        ran = [n for n in outcomes if kinds.get(n) == kind and outcomes[n][0] != "skip"]
        passed = sum(outcomes[n][0] == "pass" for n in ran)
        print(f"{kind} tests: {passed} of {len(ran)} pass ({100.0 * passed / max(len(ran), 1):.1f}%)")
    print(f"{len(outcomes)} tests in {seconds:.1f} s")
    if args.results:
        with open(args.results, "w") as f:
            json.dump({"outcomes": {n: {"outcome": o, "kind": kinds.get(n, "other"), "message": m[:500]}
                                    for n, (o, m) in sorted(outcomes.items())},
                       "expected_failures": expected}, f, indent=1)
    for name in sorted(unexpected):
        print(f"UNEXPECTED FAILURE {name}: {outcomes[name][1].strip().splitlines()[-1][:300] if outcomes[name][1].strip() else ''}")
    for name in sorted(stale):
        print(f"UNEXPECTED PASS {name}: remove it from {os.path.basename(EXPECTED)}")
    return 1 if unexpected or stale else 0


if __name__ == "__main__":
    sys.exit(main())
