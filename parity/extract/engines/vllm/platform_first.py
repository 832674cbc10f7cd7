"""The CPU platform chosen before any vLLM module is imported, whichever family is tried first.

vLLM decides per platform at import time in some modules (0.12-0.15's
`UnquantizedFusedMoEMethod` binds `forward_native` to `forward_cpu` only when
`current_platform.is_cpu()` while its class body runs; on another platform it binds
`forward_cuda`, whose Triton `fused_experts` is None without CUDA). A release outside every
family's range is placed by trying the families newest first (parity.extract.families.place),
and the newest families' code-path checks import such modules. Their platform set-up is only
`VLLM_TARGET_DEVICE=cpu`, which the official wheels of 0.12-0.27 ignore (their CPU plugin looks
for a CPU build): `current_platform` resolved to `UnspecifiedPlatform` there, and the MoE layers
of gpt-oss then took the CUDA path (TypeError: 'NoneType' object is not callable) after the 0.11
family set the CPU platform by hand, too late. `cpu_platform_unless_chosen` sets it first.
"""

from __future__ import annotations


def cpu_platform_unless_chosen() -> None:
    """`vllm.platforms._current_platform = CpuPlatform()` where no platform is chosen yet (as the
    0.11-0.27 families set it by hand); a platform already resolved is left as it is."""
    import vllm.platforms as platforms

    if getattr(platforms, "_current_platform", None) is None:
        from vllm.platforms.cpu import CpuPlatform

        platforms._current_platform = CpuPlatform()
