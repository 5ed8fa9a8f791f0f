// Does compute-sanitizer's racecheck follow a named barrier of part of a block (bar.sync id, 64) placed between two
// __syncthreads? The tensor-core references (reference/device/tc_mma.cuh, PairWarp) run each tile of a cp.async
// double-buffered sweep as: block barrier, the element-wise work, the pair's named barrier, the reads of the tile,
// block barrier. racecheck reported hazards between the next tile's cp.async writes and this tile's ldmatrix reads of
// the other stage. This kernel has that skeleton and nothing else: every read of a stage is separated from the next
// write of that stage by a __syncthreads, with or without the named barrier (argv[1]: 0 without, 1 with, 2 on alternate tiles). If racecheck
// reports hazards with it and none without, they come from the tool's model of named barriers, not from the kernels.
//
//   nvcc -O2 -arch=sm_90 -o racecheck_pair_barrier lab/racecheck_pair_barrier.cu
//   compute-sanitizer --tool racecheck ./racecheck_pair_barrier 0; compute-sanitizer --tool racecheck ./racecheck_pair_barrier 1
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
