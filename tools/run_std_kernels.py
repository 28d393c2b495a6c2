#!/usr/bin/python3
"""Runs a representative set of the packed standard kernels on the best device and checks them.

Usage: run_std_kernels.py BUNDLE [--all] [--explain]

BUNDLE: a path, or an installed bundle's name ("tilelang-std", found by tl_bundle_open_by_name
along $TILELANG_KERNEL_PATH and <prefix>/share/tilelang).

Only the runtime's Python binding (ctypes over the C ABI) and numpy run the kernels; inputs and
float64 references come from kernels/*.py (each factory's case builder). Prints one row per
kernel: name, device, variant chosen, max error against the reference (relative to the
reference's largest magnitude), time of one launch, and a rate where it means something.
A kernel the bundle has no variant for on the best device falls back to the next device, and
the rejection is printed. Exit status 1 if any kernel is wrong.
"""
import os
import sys

import numpy as np
import tilelang_runtime as tlrt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from kernels import checks  # noqa: E402

REPRESENTATIVE = [
    "gemm_f32_nn", "gemm_f16_tn", "gemm_bf16_nt_bias_gelu", "gemm_i8_nt", "bmm_f16_nn",
    "w4a16_g128_decode", "w8a16_g64_prefill",
    "flash_attn_fwd_gqa_d128_causal", "attn_decode_split_gqa_d128", "attn_paged_decode_split_gqa_d128",
    "attn_bwd_mha_d64_causal",
    "rmsnorm_f16_4096", "layernorm_f32_1024", "softmax_f32_1024", "silu_and_mul_f16_4096", "rotary_f16_h8_d128",
    "topk8_f32_1024", "cumsum_f32", "moe_gating_e128_top8", "moe_expert_offsets_e128_top8",
]


def main(argv):
    if not argv or argv[0].startswith("-"):
        print(__doc__)
        return 2
    path, run_all, explain = argv[0], "--all" in argv, "--explain" in argv
    rt = tlrt.Runtime()
    print("devices:")
    for d in rt.devices():
        print("  ", d)
    best = rt.best_device()
    candidates = [best] + [d for d in rt.devices() if (d.backend, d.ordinal) != (best.backend, best.ordinal)]
    bundle = rt.open_bundle_by_name(path)
    entries = {e["name"]: e for e in checks.load_manifest()["kernels"]}
    names = sorted(entries) if run_all else [n for n in REPRESENTATIVE if n in entries]
    rows, failures = [], 0
    for name in names:
        result = None
        for device in candidates:
            try:
                prepared = bundle.kernel(name).prepare(device)
            except tlrt.TLError as e:
                print(f"   {name}: not on {device.backend}:{device.ordinal}: {e.message.splitlines()[0]}")
                continue
            if explain:
                print(prepared.explain())
            result = checks.run_instance(bundle, entries[name], device, np.random.default_rng(), time_it=True)
            break
        if result is None:
            failures += 1
            rows.append((name, "-", "-", "no device", "-", ""))
            continue
        failures += not result.ok
        rate = f"{result.flops / result.seconds / 1e9:.1f} GFLOP/s" if result.flops and result.seconds else ""
        rows.append((name, result.device, result.variant, f"{result.err:.1e} {'ok' if result.ok else 'FAIL'}",
                     f"{result.seconds * 1e3:.2f} ms", rate))
    head = ("kernel", "device", "variant", "max error", "time", "rate")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    print(fmt.format(*head))
    print(fmt.format(*("-" * w for w in widths)))
    for r in rows:
        print(fmt.format(*r))
    print(f"{len(rows) - failures}/{len(rows)} kernels correct" if failures else f"all {len(rows)} kernels correct")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
