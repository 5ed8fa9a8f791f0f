/* flashcheck plugin ABI, version 1.
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
 * Plain C: the header compiles as C99 and C++, and the library may be written in any language. */
#ifndef FLASHCHECK_PLUGIN_H_
#define FLASHCHECK_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FLASHCHECK_PLUGIN_ABI_VERSION 1

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

struct FlashcheckKernel;

/* Runs one call of kernel `self`; returns FLASHCHECK_OK, or FLASHCHECK_ERROR with a NUL-terminated message
 * in error[0 .. error_size). */
typedef int (*FlashcheckRunFn)(const struct FlashcheckKernel* self, const FlashcheckRunArgs* args, char* error,
                               size_t error_size);

typedef struct FlashcheckKernel {
  const char* name;          /* unique among all kernels, e.g. "myteam-fwd" */
  const char* contract_json; /* the contract: the fields `flashcheck list --json` prints (docs/PLUGINS.md) */
  FlashcheckRunFn run;
  void* user_data;           /* the plugin's own, passed back through `self` */
} FlashcheckKernel;

typedef struct FlashcheckPlugin {
  uint32_t abi_version; /* FLASHCHECK_PLUGIN_ABI_VERSION: a mismatch is refused with a clear error */
  const char* name;     /* the plugin's name, for messages */
  uint32_t num_kernels;
  const FlashcheckKernel* kernels;
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
