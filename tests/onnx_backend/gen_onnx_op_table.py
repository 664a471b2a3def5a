"""Writes docs/onnx.md's tables, never by hand: the op table (from the library)
and the per-op results of the ONNX backend tests (from a run's
onnx_backend_test.py --results).

Usage: gen_onnx_op_table.py RESULTS.json DATA_DIR [DOC] [--check]
DATA_DIR is the suite's data the run used (each node test's model names its
op); the op table comes from the library the run loaded ($SAMBA_LIBRARY).
Each table replaces the text between its markers in DOC (docs/onnx.md).
--check changes nothing and fails when DOC differs from what it would write
(the backend test runs it, so the tables follow the importer)."""
import collections
import json
import os
import sys

import onnx

BEGIN = "<!-- onnx-backend-table: begin (tests/onnx_backend/gen_onnx_op_table.py) -->"
END = "<!-- onnx-backend-table: end -->"
TABLE_BEGIN = "<!-- onnx-op-table: begin (tests/onnx_backend/gen_onnx_op_table.py) -->"
TABLE_END = "<!-- onnx-op-table: end -->"
FLOAT = onnx.TensorProto.FLOAT
FLOATING = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}


def node_test_ops(data_dir, names):
    """{test name: (op type, whether every floating value is float32)} of node tests."""
    out = {}
    for name in names:
        base = name[: -len("_cpu")] if name.endswith("_cpu") else name
        case = base[: -len("_expanded")] if base.endswith("_expanded") else base
        path = os.path.join(data_dir, "node", case, "model.onnx")
        if not os.path.exists(path):
            continue
        model = onnx.load(path)
        types = [v.type.tensor_type.elem_type for v in list(model.graph.input) + list(model.graph.output)
                 if v.type.HasField("tensor_type")]
        floating = [t for t in types if t in FLOATING]
        out[name] = (model.graph.node[0].op_type, bool(floating) and all(t == FLOAT for t in floating))
    return out


def main():
    check = "--check" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--check"]
    results_path, data_dir = args[:2]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    doc = args[2] if len(args) > 2 else os.path.join(root, "docs/onnx.md")
    sys.path.insert(0, os.path.join(root, "bindings/python"))
    from sambaflow.samba.onnx_import import max_opset, op_table

    results = json.load(open(results_path))
    outcomes = results["outcomes"]
    expected = results["expected_failures"]
    node = {n: v for n, v in outcomes.items() if v["kind"] == "node" and v["outcome"] != "skip"}
    ops = node_test_ops(data_dir, node)
    implemented = {row["op"] for row in op_table()}
    opset = max_opset()
    known = sorted({s.name for s in onnx.defs.get_all_schemas_with_history()
                    if s.domain == "" and s.since_version <= opset and not s.deprecated})

    per_op = collections.defaultdict(lambda: {"tests": 0, "pass": 0, "f32": 0, "f32_pass": 0,
                                              "why": collections.Counter()})
    for name, v in node.items():
        if name not in ops:
            continue
        op, f32 = ops[name]
        row = per_op[op]
        row["tests"] += 1
        row["f32"] += f32
        if v["outcome"] == "pass":
            row["pass"] += 1
            row["f32_pass"] += f32
        else:
            row["why"][expected.get(name, "unexpected failure")] += 1

    passed = sum(v["outcome"] == "pass" for v in node.values())
    simple = [v for v in outcomes.values() if v["kind"] == "simple" and v["outcome"] != "skip"]
    lines = [BEGIN, "",
             f"Node tests: **{passed} of {len(node)} pass ({100.0 * passed / max(len(node), 1):.1f}%)**; "
             f"simple model tests: {sum(v['outcome'] == 'pass' for v in simple)} of {len(simple)}. "
             f"ONNX ops of opsets up to {opset}: {len(known)}, {len(implemented & set(known))} in the op table.",
             "",
             "| ONNX op | status | node tests passing | float32 tests passing | why the others fail |",
             "|---|---|---|---|---|"]
    for op in sorted(set(known) | set(per_op)):
        row = per_op.get(op)
        tests = f"{row['pass']} / {row['tests']}" if row else "-"
        f32 = f"{row['f32_pass']} / {row['f32']}" if row and row["f32"] else "-"
        if op not in implemented:
            status = "not implemented"
            why = ""
        elif row is None:
            status = "implemented (no node test)"
            why = ""
        elif row["pass"] == row["tests"]:
            status = "passes"
            why = ""
        else:
            status = "fails" if row["pass"] == 0 else "partly passes"
            why = "; ".join(f"{reason} ({n})" if n > 1 else reason for reason, n in row["why"].most_common())
            why = why.replace("|", "\\|")
        lines.append(f"| {op} | {status} | {tests} | {f32} | {why} |")
    lines += ["", END]

    rows = [TABLE_BEGIN, "", "| ONNX op | opsets | registry ops |", "|---|---|---|"]
    for row in sorted(op_table(), key=lambda r: (r["op"], r["since"])):
        rows.append(f"| {row['op']} | {row['since']}-{row['until']} | {row['registry_ops']} |")
    rows += ["", TABLE_END]

    before = text = open(doc).read()
    for begin, end, block in ((BEGIN, END, lines), (TABLE_BEGIN, TABLE_END, rows)):
        if begin in text and end in text:
            text = text[: text.index(begin)] + "\n".join(block) + text[text.index(end) + len(end):]
        else:
            text = text.rstrip("\n") + "\n\n" + "\n".join(block) + "\n"
    if check:
        if text != before:
            print(f"{doc} is out of date with this run; rewrite its tables with\n"
                  f"  SAMBA_LIBRARY=... python3 {os.path.relpath(__file__, root)} {results_path} {data_dir}")
            return 1
        return 0
    open(doc, "w").write(text)
    print(f"{doc}: {len(lines) - 8} ops; node tests {passed} / {len(node)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
