// Paged attention for a ragged batch (decode rows and chunked-prefill rows
// alike): every row reads its sequence's K/V through a block table and attends
// to keys 0..=its position. The device twin of
// crates/tessera-model/src/attention/ and of the CPU contract in
// crates/tessera-model/src/device/reference.rs (same work split, same merge).
//
// Layouts (row-major):
//   q            [rows, num_heads, head_dim]                    f32
//   k/v pools    [num_blocks, num_kv_heads, block_size, head_dim] T (f16, bf16 or f32)
//   block_tables [seqs, max_blocks]                              u32
//   row_seq, row_pos [rows]                                      u32
//   partials     max/sum [rows, num_heads, partitions], acc [.., head_dim]   f32
//   out          [rows, num_heads, head_dim]                    f32
//
// Kernel 1 (grid rows × num_kv_heads × partitions, TESSERA_ATTN_THREADS
// threads): one thread block scores one 256-key partition for the GQA group's
// query heads (each K row is read once for the whole group), keeps the scores
// in shared memory, takes their max and exp-sum (online softmax state of the
// partition) and accumulates the V rows, one output element per thread.
// Kernel 2 (grid rows × num_heads, head_dim threads): log-sum-exp merge of the
// partitions and the final normalization.
#include "tessera_common.cuh"

#define TESSERA_PARTITION 256
#define TESSERA_ATTN_THREADS 128

// Dynamic shared memory: group × head_dim queries, group × PARTITION scores,
// one float per warp for the reductions.
template <typename T>
__device__ void tessera_attend_partition(
    const float* __restrict__ q, const T* __restrict__ k_pool, const T* __restrict__ v_pool,
    const uint32_t* __restrict__ block_tables, const uint32_t* __restrict__ row_seq,
    const uint32_t* __restrict__ row_pos, float* __restrict__ part_max, float* __restrict__ part_sum,
    float* __restrict__ part_acc, int num_heads, int num_kv_heads, int head_dim, int block_size,
    int max_blocks, int partitions, float scale) {
    extern __shared__ float smem[];
    const int row = blockIdx.x, kv_head = blockIdx.y, part = blockIdx.z;
    const int group = num_heads / num_kv_heads;
    float* queries = smem;
    float* scores = queries + group * head_dim;
    float* scratch = scores + group * TESSERA_PARTITION;

    const int context = (int)row_pos[row] + 1;
    const int start = part * TESSERA_PARTITION;
    const int end = min(start + TESSERA_PARTITION, context);
    const size_t first_head = (size_t)row * num_heads + (size_t)kv_head * group;
    // The state of head (first_head + g) and partition `part`.
    const auto state = [&](int g) { return (first_head + g) * partitions + part; };

    if (start >= context) {  // uniform over the block: this row's context is shorter
        for (int g = threadIdx.x; g < group; g += blockDim.x) {
            part_max[state(g)] = -INFINITY;
            part_sum[state(g)] = 0.0f;
        }
        for (int i = threadIdx.x; i < group * head_dim; i += blockDim.x) {
            part_acc[state(i / head_dim) * head_dim + i % head_dim] = 0.0f;
        }
        return;
    }

    for (int i = threadIdx.x; i < group * head_dim; i += blockDim.x) {
        queries[i] = q[first_head * head_dim + i];
    }
    __syncthreads();

    const uint32_t* table = block_tables + (size_t)row_seq[row] * max_blocks;
    const size_t head_stride = (size_t)block_size * head_dim;
    const size_t block_stride = (size_t)num_kv_heads * head_stride;
    const auto key_row = [&](const T* pool, int key) {
        return pool + table[key / block_size] * block_stride + kv_head * head_stride +
               (size_t)(key % block_size) * head_dim;
    };

    const int n = end - start;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const T* k = key_row(k_pool, start + i);
        for (int g = 0; g < group; ++g) {
            const float* qg = queries + g * head_dim;
            float dot = 0.0f;
            for (int d = 0; d < head_dim; ++d) dot = fmaf(qg[d], tessera_widen(k[d]), dot);
            scores[g * TESSERA_PARTITION + i] = dot * scale;
        }
    }
    __syncthreads();

    for (int g = 0; g < group; ++g) {
        float* s = scores + g * TESSERA_PARTITION;
        float max = -INFINITY;
        for (int i = threadIdx.x; i < n; i += blockDim.x) max = fmaxf(max, s[i]);
        max = tessera_block_max(max, scratch);
        float sum = 0.0f;
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            const float w = expf(s[i] - max);
            s[i] = w;
            sum += w;
        }
        sum = tessera_block_sum(sum, scratch);
        if (threadIdx.x == 0) {
            part_max[state(g)] = max;
            part_sum[state(g)] = sum;
        }
    }
    __syncthreads();

    // Consecutive threads own consecutive elements of a V row: coalesced reads.
    for (int o = threadIdx.x; o < group * head_dim; o += blockDim.x) {
        const int g = o / head_dim, d = o % head_dim;
        const float* w = scores + g * TESSERA_PARTITION;
        float acc = 0.0f;
        for (int i = 0; i < n; ++i) acc = fmaf(w[i], tessera_widen(key_row(v_pool, start + i)[d]), acc);
        part_acc[state(g) * head_dim + d] = acc;
    }
}

#define TESSERA_ATTENTION(NAME, T)                                                                     \
    extern "C" __global__ void NAME(                                                                   \
        const float* q, const T* k_pool, const T* v_pool, const uint32_t* block_tables,                \
        const uint32_t* row_seq, const uint32_t* row_pos, float* part_max, float* part_sum,            \
        float* part_acc, int num_heads, int num_kv_heads, int head_dim, int block_size, int max_blocks, \
        int partitions, float scale) {                                                                 \
        tessera_attend_partition<T>(q, k_pool, v_pool, block_tables, row_seq, row_pos, part_max,       \
                                    part_sum, part_acc, num_heads, num_kv_heads, head_dim, block_size, \
                                    max_blocks, partitions, scale);                                    \
    }

TESSERA_ATTENTION(tessera_paged_attention_f32, float)
TESSERA_ATTENTION(tessera_paged_attention_f16, __half)
TESSERA_ATTENTION(tessera_paged_attention_bf16, __nv_bfloat16)

// Grid rows × num_heads, head_dim threads (≤ 1024): merge the partitions.
extern "C" __global__ void tessera_paged_attention_merge(const float* part_max, const float* part_sum,
                                                         const float* part_acc, float* out, int head_dim,
                                                         int partitions) {
    const size_t head = (size_t)blockIdx.x * gridDim.y + blockIdx.y;
    const int d = threadIdx.x;
    if (d >= head_dim) return;
    const size_t first = head * partitions;
    float max = -INFINITY;
    for (int p = 0; p < partitions; ++p) {
        if (part_sum[first + p] > 0.0f) max = fmaxf(max, part_max[first + p]);
    }
    float total = 0.0f, acc = 0.0f;
    for (int p = 0; p < partitions; ++p) {
        if (part_sum[first + p] > 0.0f) {
            const float w = expf(part_max[first + p] - max);
            total += part_sum[first + p] * w;
            acc = fmaf(part_acc[(first + p) * head_dim + d], w, acc);
        }
    }
    out[head * head_dim + d] = acc / total;
}
