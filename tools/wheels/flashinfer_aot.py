"""Compiles, on a machine without a GPU, the FlashInfer kernels that flashcheck's adapter loads, and packs them for an
offline GPU node, so that its device time goes to testing instead of to nvcc.

    python tools/wheels/flashinfer_aot.py --arch 9.0 --dtype bf16 --head-dim 128 --out .whl/flashinfer-aot.tar.xz

FlashInfer (0.7.x) JIT-compiles one module per configuration on first use: ten CUDA files per batch-prefill module
(paged and ragged kernels for four mask modes, the planner, the bindings), minutes of nvcc each. It loads a module
from flashinfer/data/aot/NAME/NAME.so before compiling it (flashinfer/jit/env.py: get_aot_artifacts), so the modules
built here, unpacked there by ci/gpu.sh, are used as they are; a configuration not built here is still compiled on
the node. The configurations are the ones kernels/python/flashcheck_kernels/flashinfer.py plans: the fa3 backend
(chosen on sm90 without a custom mask) and the fa2 backend (custom masks), each with and without a sliding window and
a logits soft cap, and the packbits module that turns custom masks into FlashInfer's bit layout.

Needs flashinfer importable (with torch; no GPU) and nvcc; modules compile one after another, each with MAX_JOBS
parallel nvcc processes, into FlashInfer's own cache (resumable: a module already built is not rebuilt).
"""
import argparse
import itertools
import os
import sys
import tarfile
import time

_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


def specs(dtypes, head_dims):
    import torch
    from flashinfer.jit.attention import modules
    from flashinfer.jit.quantization import gen_quantization_module
    out = [gen_quantization_module()]
    for name, d, swa, cap in itertools.product(dtypes, head_dims, (False, True), (False, True)):
        dt = getattr(torch, _DTYPES[name])
        args = (dt, dt, dt, torch.int32, d, d, 0, swa, cap, False)  # no positional encoding, no fp16 QK reduction
        out.append(modules.gen_batch_prefill_module("fa3", *args))
        out.append(modules._gen_batch_prefill_primary_module("fa2", *args))  # what get_batch_prefill_module loads
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", default="9.0", help="CUDA architecture of the GPU node (FLASHINFER_CUDA_ARCH_LIST)")
    p.add_argument("--dtype", nargs="+", default=["bf16"], choices=sorted(_DTYPES))
    p.add_argument("--head-dim", nargs="+", type=int, default=[128])
    p.add_argument("--out", required=True, help="the .tar.xz to write (NAME/NAME.so for each module)")
    a = p.parse_args()
    os.environ["FLASHINFER_CUDA_ARCH_LIST"] = a.arch  # read when flashinfer is imported, so set first
    todo = specs(a.dtype, a.head_dim)
    for i, spec in enumerate(todo, 1):
        start = time.time()
        spec.build()
        print(f"[{i}/{len(todo)}] {spec.name}: {time.time() - start:.0f} s", flush=True)
    with tarfile.open(a.out, "w:xz", preset=9) as tar:
        for spec in todo:
            tar.add(spec.jit_library_path, arcname=f"{spec.name}/{spec.name}.so")
    print(f"{a.out}: {len(todo)} modules, {os.path.getsize(a.out) / 2**20:.1f} MiB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
