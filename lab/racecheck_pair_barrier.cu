// Does compute-sanitizer's racecheck follow a named barrier of part of a block (bar.sync id, 64) placed between two
// __syncthreads? The tensor-core gradient reference (reference/device/tc_mma.cuh, PairWarp) runs each tile of a
// cp.async double-buffered sweep as: block barrier, the element-wise work, the pair's named barrier, the reads of the
// tile, block barrier; a pair that sees no key of a tile skipped it. racecheck reported hazards between the next
// tile's cp.async writes and a tile's ldmatrix reads. This kernel has that skeleton and nothing else: every read of a
// stage is separated from the next write of that stage by a __syncthreads. argv[1]: 0, no named barrier; 1, every pair
// at its barrier on every tile; 2, a pair at its barrier on alternate tiles only. Hazards with 2 alone come from the
// tool's model of named barriers, not from the kernel.
//
//   nvcc -O2 -arch=sm_90 -o racecheck_pair_barrier lab/racecheck_pair_barrier.cu
//   for v in 0 1 2; do compute-sanitizer --tool racecheck ./racecheck_pair_barrier $v; done
//
// On an H100 (compute-sanitizer 2025.3.1, driver 580.159.04, nvcc 13.0), 2026-12-07: 0 and 1 report no hazard; 2
// reports one error, the ldmatrix after the named barrier against the next tile's cp.async writes (2,752 hazards),
// the same pair of instructions it reported in the gradient reference's dQ and dK/dV kernels.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

constexpr int kThreads = 256, kRows = 64, kRowBytes = 256, kStage = kRows * kRowBytes;  // a tile: 64 rows of 256 B

__device__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}

__global__ void sweep(const unsigned char* g, int tiles, int pair_barrier, float* out) {
  extern __shared__ __align__(128) unsigned char sm[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, group = warp % 4;
  float acc = 0.0f;
  for (int t = -1, st = 1; t < tiles; ++t, st ^= 1) {
    if (t + 1 < tiles)  // the next tile into the other stage, 16 bytes a thread at a time
      for (int i = tid * 16; i < kStage; i += kThreads * 16) cp_async16(sm + (st ^ 1) * kStage + i, g + (t + 1) * kStage + i);
    asm volatile("cp.async.commit_group;\n" ::);
    if (t < 0) continue;
    asm volatile("cp.async.wait_group 1;\n" ::);
    __syncthreads();
    // 1: every pair at its barrier on every tile; 2: a pair on alternate tiles only (both its warps alike), as the
    // references' pairs that see no key of a tile skip it.
    if (pair_barrier == 1 || (pair_barrier == 2 && (t + group) % 2 == 0))
      asm volatile("bar.sync %0, %1;\n" ::"r"(1 + group), "r"(64) : "memory");
    // ldmatrix (transposed, as the references read V) of 8x8 blocks that other warps' copies wrote.
    unsigned r[4];
    const unsigned char* at = sm + st * kStage + ((lane % 16) + 16 * (warp % 4)) * kRowBytes + (lane / 16) * 16 + 32 * (warp / 4);
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(at));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
    acc += __uint_as_float(r[0] ^ r[1] ^ r[2] ^ r[3]) * 0.0f + static_cast<float>(r[0] & 1u);
    __syncthreads();
  }
  out[blockIdx.x * kThreads + tid] = acc;
}

}  // namespace

int main(int argc, char** argv) {
  const int pair_barrier = argc > 1 ? std::atoi(argv[1]) : 1, tiles = 8, blocks = 4;
  unsigned char* g = nullptr;
  float* out = nullptr;
  if (cudaMalloc(&g, static_cast<size_t>(tiles) * kStage) != cudaSuccess ||
      cudaMalloc(&out, sizeof(float) * blocks * kThreads) != cudaSuccess)
    return std::printf("cudaMalloc failed\n"), 2;
  cudaMemset(g, 1, static_cast<size_t>(tiles) * kStage);
  sweep<<<blocks, kThreads, 2 * kStage>>>(g, tiles, pair_barrier, out);
  const cudaError_t e = cudaDeviceSynchronize();
  std::printf("pair barrier %d: %s\n", pair_barrier, cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
