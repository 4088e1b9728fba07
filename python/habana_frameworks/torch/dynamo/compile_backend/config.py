"""Options of `hpu_backend` (`torch.compile(..., options={...})`), each with the bridge's
environment variable and default. A torch config module: `config.patch(options)` applies
options for one compilation, and an unknown key raises AttributeError, as on Gaudi.

(No `from __future__ import annotations` here: install_config_module reads every
module-level value as an option.)"""
import sys

from torch.utils._config_module import install_config_module

from . import _env

# Clusters become Go recipes; off runs each cluster's FX submodule op by op.
use_compiled_recipes: bool = _env.env_bool("PT_HPU_COMPILE_USE_RECIPES", True)
# habana (hpusim's table: decompose only what has no native kernel), core_aten, none.
decomposition_mode: str = _env.env_str("PT_HPU_COMPILE_DECOMPOSITION_MODE", "habana")
keep_input_mutations: bool = _env.env_bool("PT_HPU_KEEP_INPUT_MUTATIONS", True)
# False: any node left to run eagerly fails the compilation (an AssertionError).
use_eager_fallback: bool = _env.env_bool("PT_HPU_USE_EAGER_FALLBACK", True)
use_graph_freezing: bool = _env.env_bool("PT_HPU_COMPILE_GRAPH_FREEZE", False)
discard_frozen_params: bool = _env.env_bool("PT_HPU_COMPILE_DISCARD_FROZEN_PARAMS", False)
remove_unnecessary_clones: bool = _env.env_bool("PT_HPU_COMPILE_REMOVE_UNNECESSARY_CLONES", True)
joint_graph_constant_folding: bool = _env.env_bool("PT_HPU_COMPILE_JOINT_GRAPH_CONSTANT_FOLDING", True)
use_inplace_allreduce: bool = _env.env_bool("PT_HPU_USE_INPLACE_COLLECTIVE", True)
use_inplace_index_copy: bool = _env.env_bool("PT_HPU_USE_INPLACE_INDEX_COPY", True)
# False compiles inference graphs with the training compiler.
inference: bool = _env.env_bool("PT_HPU_USE_INFERENCE_COMPILER", True)
enable_sfg: bool = _env.env_bool("PT_HPU_ENABLE_SFG", False)
use_cpp_partitioner: bool = _env.env_bool("PT_HPU_USE_CPP_PARTITIONER", True)
enable_allreduce_graph_split: bool = _env.env_bool("PT_HPU_ENABLE_ALLREDUCE_GRAPH_SPLIT", True)
enable_waittensor_graph_split: bool = _env.env_bool("PT_HPU_ENABLE_WAITTENSOR_GRAPH_SPLIT", True)
# One static recipe per input-shape signature, even for graphs with symbolic shapes.
force_static_compile: bool = _env.env_bool("PT_HPU_FORCE_STATIC_COMPILE", False)
reinplace_add: bool = _env.env_bool("PT_HPU_REINPLACE_ADD", True)
reassign_full_copy: bool = _env.env_bool("PT_HPU_REASSIGN_FULL_COPY", True)
reassign_copy_: bool = _env.env_bool("PT_HPU_REASSIGN_COPY_", True)
use_boxed_input: bool = _env.env_bool("PT_HPU_USE_BOXED_INPUT", True)
use_generic_reinplacer: bool = _env.env_bool("PT_HPU_USE_GENERIC_REINPLACER", True)
enable_synapse_input_reuse: bool = _env.env_bool("PT_HPU_ENABLE_SYNAPSE_INPUT_REUSE", True)
# hpusim: regions that need none of AOT autograd's runtime wrappers run as one
# autograd.Function (fast_runtime.py); off keeps AOT's wrappers everywhere.
use_fast_runtime: bool = _env.env_bool("PT_HPU_COMPILE_FAST_RUNTIME", True)
# hpusim: each new recipe's first runs are timed with its kernels split over the worker
# pool and on the calling thread alone, and it keeps the faster (results are the same).
tune_recipe_threads: bool = _env.env_bool("PT_HPU_COMPILE_TUNE_THREADS", True)
# hpusim: a compiled torch.optim.Adam/AdamW step runs as one multi-tensor Go op per
# group of equal hyper-parameters, bit-equal to eager CPU Adam (optimizer_pattern.py).
# The step counts still reach it through the host scalar program (host_scalars.py).
fuse_optimizer: bool = _env.env_bool("PT_HPU_COMPILE_FUSE_OPTIMIZER", True)
dump_graph_repro: bool = _env.env_bool("PT_HPU_DUMP_GRAPH_REPRO", False)
# hpusim: recipes of backward graphs, and of graphs whose ops cannot fail on the data
# (no index, gather/scatter, embedding, loss-target ops), are launched asynchronously
# on the device stream in eager mode (bridge/stream.go): the call returns at once and
# the next op, copy or host read waits for them, as on a Gaudi card. Read by the core
# too (HPUSIM_ASYNC_LAUNCH=0 runs every recipe at once).
async_launch: bool = _env.env_bool("HPUSIM_ASYNC_LAUNCH", True)

install_config_module(sys.modules[__name__])
# Set past the config module's __setattr__, which accepts options only.
sys.modules[__name__].__dict__["configuration_flags"] = _env.ConfigFlags(sys.modules[__name__])
