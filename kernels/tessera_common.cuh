// Shared helpers of Tessera's CUDA kernels: element conversions (K/V pools hold
// f16, bf16 or f32; arithmetic is f32) and block-wide reductions.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define TESSERA_WARP 32

__device__ __forceinline__ float tessera_widen(float x) { return x; }
__device__ __forceinline__ float tessera_widen(__half x) { return __half2float(x); }
__device__ __forceinline__ float tessera_widen(__nv_bfloat16 x) { return __bfloat162float(x); }

// Round to nearest even, as the CPU path rounds (half::f16::from_f32).
__device__ __forceinline__ void tessera_store(float* dst, float x) { *dst = x; }
__device__ __forceinline__ void tessera_store(__half* dst, float x) { *dst = __float2half_rn(x); }
__device__ __forceinline__ void tessera_store(__nv_bfloat16* dst, float x) { *dst = __float2bfloat16_rn(x); }

struct TesseraMax {
    static __device__ __forceinline__ float identity() { return -INFINITY; }
    static __device__ __forceinline__ float apply(float a, float b) { return fmaxf(a, b); }
};

struct TesseraSum {
    static __device__ __forceinline__ float identity() { return 0.0f; }
    static __device__ __forceinline__ float apply(float a, float b) { return a + b; }
};

template <typename Op>
__device__ __forceinline__ float tessera_warp_reduce(float x) {
    for (int offset = TESSERA_WARP / 2; offset > 0; offset /= 2) {
        x = Op::apply(x, __shfl_xor_sync(0xffffffffu, x, offset));
    }
    return x;
}

// Block-wide reduction; every thread of the block must call it, and gets the
// result. `scratch` holds one float per warp; it is free again on return.
template <typename Op>
__device__ __forceinline__ float tessera_block_reduce(float x, float* scratch) {
    const int lane = threadIdx.x % TESSERA_WARP, warp = threadIdx.x / TESSERA_WARP;
    const int warps = (blockDim.x + TESSERA_WARP - 1) / TESSERA_WARP;
    x = tessera_warp_reduce<Op>(x);
    if (lane == 0) scratch[warp] = x;
    __syncthreads();
    x = lane < warps ? scratch[lane] : Op::identity();
    x = tessera_warp_reduce<Op>(x);
    __syncthreads();
    return x;
}

__device__ __forceinline__ float tessera_block_max(float x, float* scratch) {
    return tessera_block_reduce<TesseraMax>(x, scratch);
}

__device__ __forceinline__ float tessera_block_sum(float x, float* scratch) {
    return tessera_block_reduce<TesseraSum>(x, scratch);
}
