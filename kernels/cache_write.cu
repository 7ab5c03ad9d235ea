// Cache write (slot mapping): scatter each batch row's new K (or V) rows into
// the pool at slot = block × block_size + offset, rounding to the pool's
// element type. The device twin of KvCache::write and of
// crates/tessera-model/src/device/reference.rs `cache_write`.
//
//   src   [rows, num_kv_heads, head_dim]                        f32
//   pool  [num_blocks, num_kv_heads, block_size, head_dim]      T
//   slots [rows]                                                u32
// Grid: rows; threads stride over num_kv_heads × head_dim.
#include "tessera_common.cuh"

template <typename T>
__device__ void tessera_write_rows(T* __restrict__ pool, const float* __restrict__ src,
                                   const uint32_t* __restrict__ slots, int num_kv_heads, int head_dim,
                                   int block_size) {
    const int row = blockIdx.x;
    const size_t slot = slots[row];
    const size_t block = slot / block_size, offset = slot % block_size;
    const int width = num_kv_heads * head_dim;
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
        const int head = i / head_dim, d = i % head_dim;
        const size_t at = ((block * num_kv_heads + head) * block_size + offset) * head_dim + d;
        tessera_store(pool + at, src[(size_t)row * width + i]);
    }
}

#define TESSERA_CACHE_WRITE(NAME, T)                                                                  \
    extern "C" __global__ void NAME(T* pool, const float* src, const uint32_t* slots, int num_kv_heads, \
                                    int head_dim, int block_size) {                                   \
        tessera_write_rows<T>(pool, src, slots, num_kv_heads, head_dim, block_size);                  \
    }

TESSERA_CACHE_WRITE(tessera_cache_write_f32, float)
TESSERA_CACHE_WRITE(tessera_cache_write_f16, __half)
TESSERA_CACHE_WRITE(tessera_cache_write_bf16, __nv_bfloat16)
