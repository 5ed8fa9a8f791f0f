/* flashcheck plugin ABI, version 2 (version 1 plugins still load: they are forward-only).
 *
 * A plugin is a shared library that exports one C function, flashcheck_plugin(), returning a table of the
 * attention kernels it provides. flashcheck loads it with `--plugin PATH` (repeatable) or the
 * FLASHCHECK_PLUGINS environment variable (paths separated by ':'), and its kernels then appear in `list`,
 * `fuzz`, `replay`, `gate` and `bench` exactly like the built-in ones. Every call runs in one of the
 * harness's worker processes: a plugin that crashes becomes a `crash` verdict, never a dead harness.
 *
 * Tensors are DLPack DLTensors (https://github.com/dmlc/dlpack), on the device the kernel's contract
 * names ("cpu" or "cuda"), in the case's dtype (float16, bfloat16 or float32); index tensors are int32.
 * The conventions are flash-attn's varlen / KV-cache API (flash_attn_varlen_func and
 * flash_attn_with_kvcache in flash_attn/flash_attn_interface.py): packed rows, cu_seqlens offsets,
 * bottom-right causal alignment unless the contract declares top-left, windows as inclusive (left, right)
 * key distances with -1 unbounded. docs/PLUGINS.md documents every field with a complete example.
 *
 * Version 2 adds an optional backward entry per kernel (FlashcheckKernel.backward): from the upstream gradient
 * dO and the forward's q, k, v, out and lse, it writes dQ, dK and dV. A kernel with one declares a "backward"
 * object in its contract (what it supports, whether its gradients are deterministic); flashcheck's gradient
 * properties then judge it. A plugin built against version 1 (abi_version 1) is read with FlashcheckKernelV1.
 *
 * Plain C: the header compiles as C99 and C++, and the library may be written in any language. */
#ifndef FLASHCHECK_PLUGIN_H_
#define FLASHCHECK_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FLASHCHECK_PLUGIN_ABI_VERSION 2

/* Return codes of a kernel's run entry. */
#define FLASHCHECK_OK 0
#define FLASHCHECK_ERROR 1 /* the kernel rejected or failed the call; `error` says why */

/* One call. Pointers are NULL for tensors the case does not have. */
typedef struct FlashcheckRunArgs {
  uint32_t abi_version; /* FLASHCHECK_PLUGIN_ABI_VERSION */

  DLTensor* q;                /* (total_q, H, d) */
  DLTensor* k;                /* packed: (total_k, Hk, d); paged: (num_pages, page_size, Hk, d) */
  DLTensor* v;                /* as k, with dv */
  DLTensor* k_new;            /* KV cache append: (total_new, Hk, d) */
  DLTensor* v_new;            /* (total_new, Hk, dv) */
  DLTensor* cu_seqlens_q;     /* int32 (B + 1) */
  DLTensor* cu_seqlens_k;     /* int32 (B + 1): K/V storage segments (packed storage) */
  DLTensor* seqused_k;        /* int32 (B): keys used per sequence */
  DLTensor* leftpad_k;        /* int32 (B): leading key positions that are not part of the sequence */
  DLTensor* cache_seqlens;    /* int32 (B): KV cache length before the append */
  DLTensor* cu_seqlens_k_new; /* int32 (B + 1): packed appended tokens */
  DLTensor* block_table;      /* int32 (B, max_blocks), -1 padded: paged K/V */
  DLTensor* out;              /* (total_q, H, dv): write every valid row */
  DLTensor* lse;              /* float32 (total_q, H): natural-log sum of exp, when the contract returns it */

  int32_t batch;
  int32_t max_seqlen_q;
  int32_t max_seqlen_k; /* longest key range a sequence attends over */
  int32_t page_size;    /* paged K/V; 0 otherwise */
  float softmax_scale;
  float softcap;        /* 0: none; else logits = softcap * tanh(logits / softcap) */
  int32_t is_causal;
  int32_t top_left;     /* 1: the causal diagonal and windows are aligned top-left (SDPA is_causal) */
  int32_t window_left;  /* inclusive key distances; -1 unbounded; causal already folded in (right = 0) */
  int32_t window_right;
  void* stream;         /* cudaStream_t for "cuda" kernels (the harness's current stream); NULL on "cpu" */
} FlashcheckRunArgs;

/* One backward call (version 2): the gradients of the forward's output w.r.t. q, k and v for the upstream
 * gradient dout. Only for backward cases, which have packed K/V and no KV cache. */
typedef struct FlashcheckBackwardArgs {
  uint32_t abi_version;              /* FLASHCHECK_PLUGIN_ABI_VERSION */
  const FlashcheckRunArgs* forward;  /* the forward call's tensors and scalars; out and lse hold what it wrote */
  DLTensor* dout;                    /* (total_q, H, dv): the upstream gradient */
  DLTensor* dq;                      /* (total_q, H, d): write every row of the sequences */
  DLTensor* dk;                      /* (total_k, Hk, d): write every key row of the sequences' segments */
  DLTensor* dv;                      /* (total_k, Hk, dv) */
} FlashcheckBackwardArgs;

struct FlashcheckKernel;

/* Runs one call of kernel `self`; returns FLASHCHECK_OK, or FLASHCHECK_ERROR with a NUL-terminated message
 * in error[0 .. error_size). */
typedef int (*FlashcheckRunFn)(const struct FlashcheckKernel* self, const FlashcheckRunArgs* args, char* error,
                               size_t error_size);
/* Runs one backward call of kernel `self`, with the same return convention. */
typedef int (*FlashcheckBackwardFn)(const struct FlashcheckKernel* self, const FlashcheckBackwardArgs* args,
                                    char* error, size_t error_size);

typedef struct FlashcheckKernel {
  const char* name;          /* unique among all kernels, e.g. "myteam-fwd" */
  const char* contract_json; /* the contract: the fields `flashcheck list --json` prints (docs/PLUGINS.md) */
  FlashcheckRunFn run;
  void* user_data;           /* the plugin's own, passed back through `self` */
  /* Version 2: the backward, or NULL for a forward-only kernel. Non-NULL exactly when the contract has a
   * "backward" object. */
  FlashcheckBackwardFn backward;
} FlashcheckKernel;

/* A version 1 kernel entry: the first four fields of FlashcheckKernel. A plugin whose abi_version is 1 lists
 * these (and its resolve returns one); flashcheck reads them as forward-only kernels. */
typedef struct FlashcheckKernelV1 {
  const char* name;
  const char* contract_json;
  FlashcheckRunFn run;
  void* user_data;
} FlashcheckKernelV1;

typedef struct FlashcheckPlugin {
  uint32_t abi_version; /* FLASHCHECK_PLUGIN_ABI_VERSION (or 1, read as FlashcheckKernelV1); others are refused */
  const char* name;     /* the plugin's name, for messages */
  uint32_t num_kernels;
  const FlashcheckKernel* kernels; /* abi_version 1: FlashcheckKernelV1 entries */
  /* Optional (NULL if unused): kernels named on demand, e.g. "py:package.module:function". Returns the
   * kernel for `name`, or NULL with a message in error; the returned kernel stays valid for the process.
   * `prefix` is the name prefix this plugin answers ("py:"). */
  const char* resolve_prefix;
  const FlashcheckKernel* (*resolve)(const char* name, char* error, size_t error_size);
} FlashcheckPlugin;

/* The symbol every plugin exports. */
typedef const FlashcheckPlugin* (*FlashcheckPluginEntry)(void);
#define FLASHCHECK_PLUGIN_ENTRY "flashcheck_plugin"

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLASHCHECK_PLUGIN_H_ */
