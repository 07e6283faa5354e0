"""A solution written so that every catalog rule has a marked site (`// site: RULE`) to rewrite."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cfloat>  // FLT_MAX; torch/extension.h brings it in too, but the device-only compile view drops torch headers

#define BLOCK_SIZE 256  // site: launch.block_macro_halved
#define EPS 1e-5f  // site: prec.epsilon_in_define
#define TILE 16

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) {  // site: loop.tree_reduction_stops_early loop.tree_reduction_starts_late
        v += __shfl_down_sync(0xffffffff, v, offset);  // site: sync.shfl_offset_plus_one sync.shfl_mask_half_warp
    }
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, 16));  // site: sync.shfl_xor_to_down sync.shfl_offset_halved arith.fmaxf_to_fminf
    v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, 8));
    v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, 4));
    v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, 2));
    v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, 1));
    return v;
}

// Row statistics: one block per row.
__global__ void row_stats_kernel(const float* __restrict__ x, float* out, int rows, int cols) {  // site: mem.remove_restrict
    __shared__ float partial[BLOCK_SIZE / 32];  // site: mem.shared_to_local
    int row = blockIdx.x;  // site: idx.block_to_thread
    if (row >= rows) return;  // site: rel.remove_early_return rel.ge_to_gt
    float sum = 0.0f;  // site: loop.skip_accumulator_init
    float peak = -INFINITY;  // site: prec.max_identity_to_zero
    float low = FLT_MAX;  // site: prec.min_identity_to_zero
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {  // site: loop.bound_minus_one loop.start_plus_one idx.thread_to_block idx.blockdim_to_griddim rel.lt_to_le
        float v = x[row * cols + c];  // site: idx.index_plus_one idx.index_minus_one idx.swap_row_col
        sum += v * 0.5f;  // site: arith.compound_add_to_sub arith.perturb_float_constant prec.round_accumulation_to_half prec.round_accumulation_to_bfloat16
        peak = fmaxf(peak, v);
        low = fminf(low, v);  // site: arith.fminf_to_fmaxf
    }
    sum = warp_sum(sum);
    peak = warp_max(peak);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = sum;  // site: rel.eq_to_ne
    __syncthreads();  // site: sync.remove_syncthreads
    if (threadIdx.x == 0) {
        float total = 0.0f;
        for (int w = 0; w < blockDim.x / 32; ++w) total += partial[w];
        out[row * 4 + 0] = total;
        out[row * 4 + 1] = peak;
        out[row * 4 + 2] = low;
        out[row * 4 + 3] = total / (float)cols;
    }
}

// Elementwise math; grid-stride loop with a vector body and a scalar tail.
__global__ void pointwise_kernel(const float* __restrict__ a, const float* __restrict__ b, float* y, int n) {
    int stride = blockDim.x * gridDim.x;
    int n4 = n / 4;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += blockDim.x * gridDim.x) {  // site: loop.grid_stride_to_block_stride
        float4 va = reinterpret_cast<const float4*>(a)[i];
        float4 r;
        r.x = va.x + b[4 * i];  // site: arith.add_to_sub arith.drop_added_term mem.read_output_as_input
        r.y = va.y - b[4 * i + 1];  // site: arith.sub_to_add arith.swap_sub_operands idx.offset_add_to_sub
        r.z = va.z * __ldg(&b[4 * i + 2]);  // site: arith.mul_to_div mem.ldg_to_plain_load
        r.w = va.w / (b[4 * i + 3] + 2.0f);  // site: arith.div_to_mul arith.swap_div_operands prec.div_to_fdividef
        reinterpret_cast<float4*>(y)[i] = r;
    }
    for (int i = 4 * n4 + blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {  // site: loop.delete_tail_loop
        float v = expf(a[i]) + logf(b[i] + 1.0f) + tanhf(a[i]) + erff(b[i]);  // site: prec.expf_to_fast prec.logf_to_fast prec.tanhf_to_fast_formula prec.erff_to_tanh_approx
        v += __expf(a[i]) * rsqrtf(b[i] + EPS) + 1.0f / sqrtf(b[i] + 1e-6f);  // site: prec.fast_to_expf prec.rsqrtf_to_recip_sqrtf prec.recip_sqrtf_to_rsqrtf prec.epsilon_tenfold
        y[i] = v > 0.0f ? v : 0.0f;  // site: arith.negate_assigned_value rel.gt_to_ge rel.ternary_swap_branches
    }
}

// Tiled matmul; the tile count is a ceil division.
__global__ void matmul_kernel(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;  // site: idx.swap_x_y
    int col = blockIdx.x * TILE + threadIdx.x;
    double acc = 0.0;  // site: prec.double_to_float
    int tiles = (K + TILE - 1) / TILE;  // site: loop.tiles_ceil_to_floor_div
    for (int t = 0; t < tiles; ++t) {
        int ka = t * TILE + threadIdx.x;
        int kb = t * TILE + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[row * K + ka] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[kb * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) {  // site: rel.remove_bounds_guard rel.negate_if_condition
        C[row * N + col] = (float)acc;
    }
}

// Global reductions with atomics and a warp-synchronous tail.
__global__ void atomic_kernel(const float* x, const int* labels, float* total, int* best, int n) {
    __shared__ volatile float cache[64];  // site: sync.remove_volatile
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n - 1) {  // site: rel.le_to_lt
        atomicAdd(total, x[i]);  // site: sync.atomic_add_to_plain
        atomicMax(best, labels[i]);  // site: sync.atomic_max_to_plain
    }
    if (threadIdx.x < 64) cache[threadIdx.x] = 0.0f;
    __syncwarp();  // site: sync.remove_syncwarp
    __threadfence();  // site: sync.remove_threadfence
    for (int k = 0; k < 8; ++k) {
        if (k == 3 && i >= n) break;  // site: loop.break_to_continue
    }
}

torch::Tensor row_stats(torch::Tensor x) {
    int rows = x.size(0), cols = x.size(1);
    auto out = torch::zeros({rows, 4}, x.options());  // site: mem.zeros_to_empty
    row_stats_kernel<<<rows, BLOCK_SIZE>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols);  // site: launch.grid_minus_one launch.block_halved launch.block_doubled
    return out;
}

torch::Tensor pointwise(torch::Tensor a, torch::Tensor b) {
    constexpr int threads = 128;  // site: launch.block_constant_halved
    auto y = torch::zeros_like(a);  // site: mem.zeros_like_to_empty_like
    int n = a.numel();
    int blocks = (n + threads - 1) / threads;  // site: launch.grid_ceil_to_floor_div
    pointwise_kernel<<<blocks, threads>>>(a.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}

torch::Tensor matmul(torch::Tensor A, torch::Tensor B) {
    int M = A.size(0), K = A.size(1), N = B.size(1);
    auto C = torch::empty({M, N}, A.options());
    dim3 block(TILE, TILE);
    dim3 grid((N + 15) / 16, (M + TILE - 1) / TILE);  // site: launch.grid_ceil_literal_to_floor_div
    matmul_kernel<<<grid, block>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(), M, N, K);
    return C;
}

torch::Tensor atomics(torch::Tensor x, torch::Tensor labels) {
    auto total = torch::empty({1}, x.options());
    auto best = torch::empty({1}, labels.options());
    total.zero_();  // site: mem.remove_memset
    cudaMemset(best.data_ptr<int>(), 0, sizeof(int));
    int n = x.numel();
    atomic_kernel<<<(n + 255) / 256, 256, 64 * sizeof(float)>>>(  // site: launch.dynamic_shared_halved
        x.data_ptr<float>(), labels.data_ptr<int>(), total.data_ptr<float>(), best.data_ptr<int>(), n);
    return total;
}
"""

cpp_source = """
torch::Tensor row_stats(torch::Tensor x);
torch::Tensor pointwise(torch::Tensor a, torch::Tensor b);
torch::Tensor matmul(torch::Tensor A, torch::Tensor B);
torch::Tensor atomics(torch::Tensor x, torch::Tensor labels);
"""

module = load_inline(name="oracleaudit_rules_showcase", cpp_sources=cpp_source, cuda_sources=cuda_source,
                     functions=["row_stats", "pointwise", "matmul", "atomics"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return module.row_stats(x)
