"""tilelang.PassConfigKey: upstream's pass-configuration keys (same names and values).

Accepted in `pass_configs=` so upstream programs run unchanged; the C++
compiler decides its own passes, so the values are not interpreted, except
tl.disable_warp_specialized (a true value: the sm_90a variants are built
without the producer warpgroup, as TL_CUDA_WS=0 does for a whole build;
compiler.build_env_for) and this project's own tl.persistent (no upstream
equivalent; True, or a number of SMs >= 2: the sm_90a warp-specialized GEMM
as a persistent kernel, as TL_CUDA_PERSISTENT does for a whole build; False
turns it off for this compile even where the environment sets it;
compiler.persistent_switch) and tl.bulk_store (True: the sm_90a warp-specialized
GEMM's epilogue as per-row cp.async.bulk copies, as TL_CUDA_BULK_STORE=1 does
for a whole build; opt-in: slower than without on the H200, 2026-12-05) and tl.gemm_pingpong
(True: a persistent sm_90a GEMM whose block is one 128-thread warpgroup as
CUTLASS's ping-pong schedule -- two consumer warpgroups on alternate tiles --
as TL_CUDA_GEMM_PINGPONG=1 does for a whole build; opt-in: slower than the
cooperative kernel on the H200, 2026-12-05) and tl.tma_store (True: the sm_90a
GEMM's staged epilogue tile 128B-swizzled and, warp-specialized, copied to
global memory by TMA tensor stores, as TL_CUDA_TMA_STORE=1 does for a whole
build; opt-in: never run on a GPU yet). All are part of the bundle cache key.
"""

import enum
import warnings


class PassConfigKey(str, enum.Enum):
    TL_SIMPLIFY = "tl.Simplify"
    TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES = "transitively_prove_inequalities"
    TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS = "convert_boolean_to_and_of_ors"
    TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES = "apply_constraints_to_boolean_branches"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL = "propagate_knowns_to_prove_conditional"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS = "propagate_knowns_to_simplify_expressions"
    TL_SIMPLIFY_ENABLE_LET_INLINE = "enable_simplify_let_inline"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_PERSISTENT = "tl.persistent"  # this project's own: see the module docstring
    TL_BULK_STORE = "tl.bulk_store"  # this project's own: see the module docstring
    TL_GEMM_PINGPONG = "tl.gemm_pingpong"  # this project's own: see the module docstring
    TL_TMA_STORE = "tl.tma_store"  # this project's own: see the module docstring
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_EMIT_LINE_DIRECTIVES = "tl.emit_line_directives"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_ENABLE_REDUCER_PLAN_VERBOSE = "tl.enable_reducer_plan_verbose"
    TL_LAYOUT_COST_MODEL = "tl.layout_cost_model"
    TL_REDUCER_FORCE_BASELINE = "tl.reducer_force_baseline"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TL_ENABLE_LOWER_LDGSTG = "tl.enable_lower_ldgstg"
    TL_ENABLE_LOWER_LDGSTG_PREDICATED = "tl.enable_lower_ldgstg_predicated"
    TL_ENABLE_VECTORIZE_PLANNER_VERBOSE = "tl.enable_vectorize_planner_verbose"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE = "tl.loop_unswitching_allow_non_trivial_else"
    TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS = "tl.if_stmt_binding_inline_replayable_binds"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_STORAGE_REWRITE_DETECT_INPLACE = "tl.storage_rewrite_detect_inplace"
    TIR_ENABLE_EQUIV_TERMS_IN_CSE = "tir.enable_equiv_terms_in_cse_tir"
    TIR_DISABLE_CSE = "tirx.disable_cse_tir"
    TIR_SIMPLIFY = "tirx.Simplify"
    TIR_DISABLE_STORAGE_REWRITE = "tirx.disable_storage_rewrite"
    TIR_DISABLE_VECTORIZE = "tirx.disable_vectorize"
    TIR_USE_ASYNC_COPY = "tirx.use_async_copy"
    TIR_ENABLE_DEBUG = "tirx.enable_debug"
    TIR_MERGE_STATIC_SMEM = "tirx.merge_static_smem"
    TIR_ADD_LOWER_PASS = "tirx.add_lower_pass"
    TIR_NOALIAS = "tirx.noalias"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_path"
    TL_PASS_PROFILE = "tl.pass_profile"
    TL_PASS_PROFILE_THRESHOLD_MS = "tl.pass_profile_threshold_ms"


_KNOWN = frozenset(k.value for k in PassConfigKey)
_WARNED = set()


def check_pass_configs(pass_configs):
    """Accept upstream's pass_configs: keys are strings or PassConfigKey members. Keys this
    project does not know are accepted with one warning per process naming them all."""
    if not pass_configs:
        return {}
    if not isinstance(pass_configs, dict):
        raise TypeError(f"pass_configs must be a dict of key -> value, got {type(pass_configs).__name__}")
    configs = {(k.value if isinstance(k, enum.Enum) else str(k)): v for k, v in pass_configs.items()}
    unknown = sorted(k for k in configs if k not in _KNOWN and k not in _WARNED)
    if unknown:
        _WARNED.update(unknown)
        warnings.warn(f"pass_configs: unknown key(s) {', '.join(unknown)} accepted and ignored", stacklevel=3)
    return configs
