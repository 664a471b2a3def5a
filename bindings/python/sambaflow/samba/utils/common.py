"""samba.utils.common: the command line every SambaFlow app shares
(compile / run / measure-performance / measure-sections, -b, -mb,
--inference, -p) and common_app_driver, which compiles or measures a model
so that the app only writes its training loop."""
import argparse
import os

from ..session import session
from . import utils

## The commands every SambaFlow app accepts, in the order help lists them.
COMMANDS = ("compile", "run", "measure-performance", "measure-sections")


def _common_args(p):
    p.add_argument("-b", "--batch-size", type=int, default=1, help="samples per run (default 1)")
    p.add_argument("-mb", "--microbatch-size", type=int, default=0,
                   help="micro-batch size; 0 (the default) runs the batch whole")
    p.add_argument("--inference", action="store_true", help="forward only: no gradients, no optimizer")
    p.add_argument("-p", "--pef", default=None, help="the PEF compile writes and the other commands load")
    p.add_argument("--output-folder", default="out", help="where compile writes the PEF when -p is not given")
    p.add_argument("--mapping", default="section", choices=("section", "spatial"))
    p.add_argument("--o0", action="store_true", help="no graph optimizations (one op per kernel)")
    p.add_argument("--mixed-precision", default="none", choices=("none", "bf16"),
                   help="bf16: matrix products and convolutions in bf16 with fp32 accumulation, fp32 master "
                   "weights (docs/user-guide.md, Mixed precision)")
    p.add_argument("--graphamp-preset", dest="mixed_precision", choices=("mp0", "mp1"),
                   help="SambaFlow's GraphAMP presets: mp0 is --mixed-precision none, mp1 is bf16")
    p.add_argument("--seed", type=int, default=None, help="random seed of the default session")
    p.add_argument("--num-iterations", type=int, default=100, help="timed runs of measure-performance")
    p.add_argument("--run-graph-only", action="store_true", help="accepted for compatibility")
    p.add_argument("--data-parallel", action="store_true",
                   help="compile: a PEF for -ws replicas; run: average the gradients over the mpirun job's replicas")
    p.add_argument("-ws", "--world-size", type=int, default=None,
                   help="replicas a --data-parallel compile is for (default: this job's size)")
    p.add_argument("--bucket-bytes", type=int, default=0, help="gradient bucket size of a --data-parallel compile "
                   "(default 25 MiB)")
    p.add_argument("--reduce-on-rdu", action="store_true",
                   help="all-reduce in device memory rather than through pinned host buffers (same results)")
    p.add_argument("--data-parallel-mode", default="normal", choices=("normal", "inorder", "optimal"),
                   help="when each gradient bucket's all-reduce starts (docs/DISTRIBUTED.md)")


def parse_app_args(argv=None, common_parser_fn=None, run_parser_fn=None, compile_parser_fn=None,
                   dev_parser_fn=None, **_ignored):
    """Parses `argv` (default: sys.argv[1:]): a command, the common options,
    and the app's own options, which each *_parser_fn(parser) adds
    (common_parser_fn to every command, run_parser_fn to run and the
    measure commands, compile_parser_fn to compile)."""
    parser = argparse.ArgumentParser(description="A Samba app: compile the model into a PEF, then run it.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    for cmd in COMMANDS:
        p = sub.add_parser(cmd)
        _common_args(p)
        for fn in (common_parser_fn, dev_parser_fn):
            if fn:
                fn(p)
        if cmd == "compile" and compile_parser_fn:
            compile_parser_fn(p)
        if cmd != "compile" and run_parser_fn:
            run_parser_fn(p)
    args = parser.parse_args(argv)
    if args.world_size is not None and args.world_size < 1:
        parser.error(f"-ws must be at least 1, got {args.world_size}")
    if args.command != "compile":
        # The app's own session.run calls need not pass these: run() takes them from here.
        session.set_data_parallel_defaults(args.data_parallel, args.reduce_on_rdu, args.data_parallel_mode)
    if args.microbatch_size and args.batch_size % args.microbatch_size:
        parser.error(f"--microbatch-size {args.microbatch_size} must divide --batch-size {args.batch_size}")
    return args


def default_pef(args, name):
    """The PEF path of an app: args.pef, or OUTPUT_FOLDER/NAME/NAME.pef."""
    return args.pef or os.path.join(args.output_folder, name, f"{name}.pef")


def common_app_driver(args, model, inputs, optim=None, name=None, init_output_grads=True, app_dir=None,
                      loss_indices=None, squeeze_bs_dim=False, **_ignored):
    """compile: traces the model and writes the PEF (returns its path).
    measure-performance / measure-sections: loads the PEF with trace_graph and
    times it (returns the reports). run is the app's own loop."""
    name = name or type(model).__name__
    pef = default_pef(args, name)
    if getattr(args, "seed", None) is not None:
        utils.set_seed(args.seed)
    if args.command == "compile":
        os.makedirs(os.path.dirname(os.path.abspath(pef)), exist_ok=True)
        path = session.compile(model, inputs, None if args.inference else optim, name=name, pef_path=pef,
                               inference=args.inference, batch_size=args.batch_size,
                               micro_batch_size=args.microbatch_size, opt_level=0 if args.o0 else 1,
                               loss_indices=loss_indices, mapping=args.mapping, data_parallel=args.data_parallel,
                               world_size=args.world_size, bucket_bytes=args.bucket_bytes,
                               mixed_precision=getattr(args, "mixed_precision", None))
        replicas = f" for {args.world_size or utils.get_world_size()} data-parallel replicas" if args.data_parallel else ""
        print(f"compiled {name} into {path}{replicas} (log: {path}.log)")
        return path
    if args.command in ("measure-performance", "measure-sections"):
        utils.trace_graph(model, inputs, None if args.inference else optim, pef=pef,
                          init_output_grads=init_output_grads and not args.inference, mapping=args.mapping,
                          data_parallel_mode=args.data_parallel_mode)
        if args.command == "measure-performance":
            return utils.measure_performance(model, inputs, batch_size=args.batch_size, inference=args.inference,
                                             run_graph_only=args.run_graph_only, n_iterations=args.num_iterations)
        return utils.measure_sections(model, inputs, batch_size=args.batch_size, n_iterations=args.num_iterations)
    raise ValueError(f"common_app_driver handles compile, measure-performance and measure-sections; "
                     f"'{args.command}' is the app's to run")
