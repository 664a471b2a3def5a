"""samba.utils: trace_graph, trace_multigraph, init_output_grads,
measure_performance, measure_sections, set_seed, assert_close, get_rank,
get_world_size, is_distributed (all in samba.utils.utils), and
samba.utils.common's app driver."""
from .utils import (assert_close, get_file_dir, get_rank, get_world_size, init_output_grads, is_distributed,
                    measure_performance, measure_sections, set_seed, trace_graph, trace_multigraph)
from . import utils  # noqa: F401 - samba.utils.utils.trace_graph, as the modeling guide spells it
from .common import common_app_driver, parse_app_args

__all__ = ["assert_close", "common_app_driver", "get_file_dir", "get_rank", "get_world_size", "init_output_grads",
           "is_distributed", "measure_performance", "measure_sections", "parse_app_args", "set_seed", "trace_graph",
           "trace_multigraph"]
