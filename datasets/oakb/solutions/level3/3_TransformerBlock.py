import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cmath>

#define WARP_SIZE 32
#define LN_ROWS_PER_BLOCK 4
#define GEMM_BM 64
#define GEMM_BN 64
#define GEMM_BK 16
#define GEMM_THREADS 256
#define ATTN_THREADS 128
#define ACT_NONE 0
#define ACT_GELU 1

__device__ __forceinline__ float warp_reduce_sum(float v) {
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(0xffffffff, v, offset);
    }
    return v;
}

__device__ __forceinline__ float warp_reduce_max(float v) {
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, offset));
    }
    return v;
}

__device__ __forceinline__ float gelu_erf(float v) {
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

// LayerNorm over the last dimension, one warp per row, two passes (mean, then centred variance).
__global__ void layernorm_warp_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                      const float* __restrict__ beta, float* __restrict__ y,
                                      int rows, int D, float eps) {
    int warp = threadIdx.x / WARP_SIZE;
    int lane = threadIdx.x % WARP_SIZE;
    int row = blockIdx.x * LN_ROWS_PER_BLOCK + warp;
    if (row >= rows) return;   // whole warp leaves together; no block-level sync below
    const float* xr = x + (long long)row * D;
    float* yr = y + (long long)row * D;

    float s = 0.0f;
    for (int c = lane; c < D; c += WARP_SIZE) s += xr[c];
    float mean = warp_reduce_sum(s) / (float)D;

    float sq = 0.0f;
    for (int c = lane; c < D; c += WARP_SIZE) {
        float d = xr[c] - mean;
        sq += d * d;
    }
    float var = warp_reduce_sum(sq) / (float)D;
    float rstd = rsqrtf(var + eps);

    for (int c = lane; c < D; c += WARP_SIZE) {
        yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
    }
}

// C[m, n] = act(sum_k A[m, k] * W[n, k] + bias[n]) (+ residual[m, n] when residual != nullptr).
// 64x64 output tile per block, 256 threads, each thread a 4x4 register block (rows ty + 16 i, cols tx + 16 j).
__global__ void gemm_bias_act_kernel(const float* __restrict__ A, const float* __restrict__ W,
                                     const float* __restrict__ bias, const float* residual,
                                     float* __restrict__ C, int M, int N, int K, int act) {
    __shared__ float As[GEMM_BK][GEMM_BM + 1];
    __shared__ float Ws[GEMM_BK][GEMM_BN + 1];
    int tid = threadIdx.x;
    int tx = tid % 16;
    int ty = tid / 16;
    int m0 = blockIdx.y * GEMM_BM;
    int n0 = blockIdx.x * GEMM_BN;

    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += GEMM_BK) {
        for (int idx = tid; idx < GEMM_BM * GEMM_BK; idx += GEMM_THREADS) {
            int r = idx / GEMM_BK;
            int kk = idx % GEMM_BK;
            int gm = m0 + r;
            int gk = k0 + kk;
            As[kk][r] = (gm < M && gk < K) ? A[(long long)gm * K + gk] : 0.0f;
        }
        for (int idx = tid; idx < GEMM_BN * GEMM_BK; idx += GEMM_THREADS) {
            int r = idx / GEMM_BK;
            int kk = idx % GEMM_BK;
            int gn = n0 + r;
            int gk = k0 + kk;
            Ws[kk][r] = (gn < N && gk < K) ? W[(long long)gn * K + gk] : 0.0f;
        }
        __syncthreads();

        float part[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) part[i][j] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < GEMM_BK; ++kk) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Ws[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) part[i][j] += a[i] * b[j];
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] += part[i][j];
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 4; ++i) {
        int row = m0 + ty + 16 * i;
        if (row >= M) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int col = n0 + tx + 16 * j;
            if (col >= N) continue;
            float v = acc[i][j] + bias[col];
            if (act == ACT_GELU) v = gelu_erf(v);
            long long o = (long long)row * N + col;
            if (residual != nullptr) v += residual[o];
            C[o] = v;
        }
    }
}

// Scaled dot-product attention for one query row of one head: grid = (S, H, B).
// Q, K, V, O are (B*S, D) row-major with head h in columns [h*hd, (h+1)*hd).
// Dynamic shared memory: hd floats for the query row, then S floats for the scores/probabilities.
__global__ void attention_row_kernel(const float* __restrict__ Q, const float* __restrict__ Kt,
                                     const float* __restrict__ V, float* __restrict__ O,
                                     int S, int D, int hd, float scale) {
    extern __shared__ float smem[];
    float* qs = smem;
    float* ps = smem + hd;
    __shared__ float red[ATTN_THREADS / WARP_SIZE];
    __shared__ float stat;

    int i = blockIdx.x;
    int h = blockIdx.y;
    int b = blockIdx.z;
    int tid = threadIdx.x;
    int lane = tid % WARP_SIZE;
    int warp = tid / WARP_SIZE;
    const int nwarps = ATTN_THREADS / WARP_SIZE;
    long long base = (long long)b * S * D + (long long)h * hd;

    for (int d = tid; d < hd; d += ATTN_THREADS) qs[d] = Q[base + (long long)i * D + d];
    __syncthreads();

    // scores and their maximum
    float lmax = -INFINITY;
    for (int j = tid; j < S; j += ATTN_THREADS) {
        const float* kr = Kt + base + (long long)j * D;
        float dot = 0.0f;
        for (int d = 0; d < hd; ++d) dot += qs[d] * kr[d];
        dot *= scale;
        ps[j] = dot;
        lmax = fmaxf(lmax, dot);
    }
    lmax = warp_reduce_max(lmax);
    if (lane == 0) red[warp] = lmax;
    __syncthreads();
    if (warp == 0) {
        float v = lane < nwarps ? red[lane] : -INFINITY;
        v = warp_reduce_max(v);
        if (lane == 0) stat = v;
    }
    __syncthreads();
    float row_max = stat;
    __syncthreads();

    // exponentials and their sum
    float lsum = 0.0f;
    for (int j = tid; j < S; j += ATTN_THREADS) {
        float e = expf(ps[j] - row_max);
        ps[j] = e;
        lsum += e;
    }
    lsum = warp_reduce_sum(lsum);
    if (lane == 0) red[warp] = lsum;
    __syncthreads();
    if (warp == 0) {
        float v = lane < nwarps ? red[lane] : 0.0f;
        v = warp_reduce_sum(v);
        if (lane == 0) stat = v;
    }
    __syncthreads();
    float inv_sum = 1.0f / stat;

    // weighted sum of value rows
    for (int d = tid; d < hd; d += ATTN_THREADS) {
        float acc = 0.0f;
        for (int j = 0; j < S; ++j) acc += ps[j] * V[base + (long long)j * D + d];
        O[base + (long long)i * D + d] = acc * inv_sum;
    }
}

static void launch_layernorm(const torch::Tensor& x, const torch::Tensor& g, const torch::Tensor& b,
                             torch::Tensor& y, int rows, int D, float eps) {
    int blocks = (rows + LN_ROWS_PER_BLOCK - 1) / LN_ROWS_PER_BLOCK;
    layernorm_warp_kernel<<<blocks, LN_ROWS_PER_BLOCK * WARP_SIZE>>>(
        x.data_ptr<float>(), g.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), rows, D, eps);
}

static void launch_gemm(const torch::Tensor& a, const torch::Tensor& w, const torch::Tensor& bias,
                        const float* residual, torch::Tensor& c, int M, int N, int K, int act) {
    dim3 grid((N + GEMM_BN - 1) / GEMM_BN, (M + GEMM_BM - 1) / GEMM_BM);
    gemm_bias_act_kernel<<<grid, GEMM_THREADS>>>(a.data_ptr<float>(), w.data_ptr<float>(), bias.data_ptr<float>(),
                                                 residual, c.data_ptr<float>(), M, N, K, act);
}

static void check_linear(const torch::Tensor& w, const torch::Tensor& b, int64_t out_f, int64_t in_f) {
    TORCH_CHECK(w.is_cuda() && b.is_cuda(), "parameters must be CUDA tensors");
    TORCH_CHECK(w.dim() == 2 && w.size(0) == out_f && w.size(1) == in_f, "linear weight has the wrong shape");
    TORCH_CHECK(b.dim() == 1 && b.size(0) == out_f, "linear bias has the wrong shape");
}

torch::Tensor transformer_block_forward(torch::Tensor x,
                                        torch::Tensor ln1_w, torch::Tensor ln1_b,
                                        torch::Tensor wq, torch::Tensor bq,
                                        torch::Tensor wk, torch::Tensor bk,
                                        torch::Tensor wv, torch::Tensor bv,
                                        torch::Tensor wo, torch::Tensor bo,
                                        torch::Tensor ln2_w, torch::Tensor ln2_b,
                                        torch::Tensor w1, torch::Tensor b1,
                                        torch::Tensor w2, torch::Tensor b2,
                                        int64_t num_heads, double eps1, double eps2) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.dim() == 3, "x must be (batch, seq, d_model)");
    int B = x.size(0), S = x.size(1), D = x.size(2);
    TORCH_CHECK(num_heads > 0 && D % num_heads == 0, "d_model must be divisible by num_heads");
    int H = (int)num_heads;
    int hd = D / H;
    int F = w1.size(0);
    check_linear(wq, bq, D, D);
    check_linear(wk, bk, D, D);
    check_linear(wv, bv, D, D);
    check_linear(wo, bo, D, D);
    check_linear(w1, b1, F, D);
    check_linear(w2, b2, D, F);
    TORCH_CHECK(ln1_w.numel() == D && ln1_b.numel() == D && ln2_w.numel() == D && ln2_b.numel() == D,
                "layernorm parameters must have d_model elements");
    size_t attn_smem = (size_t)(hd + S) * sizeof(float);
    TORCH_CHECK(attn_smem <= 48 * 1024, "sequence too long for the attention kernel");

    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    int rows = B * S;
    if (rows == 0 || D == 0) return out;

    auto g1 = ln1_w.contiguous(), be1 = ln1_b.contiguous(), g2 = ln2_w.contiguous(), be2 = ln2_b.contiguous();
    auto wqc = wq.contiguous(), wkc = wk.contiguous(), wvc = wv.contiguous(), woc = wo.contiguous();
    auto w1c = w1.contiguous(), w2c = w2.contiguous();
    auto bqc = bq.contiguous(), bkc = bk.contiguous(), bvc = bv.contiguous(), boc = bo.contiguous();
    auto b1c = b1.contiguous(), b2c = b2.contiguous();

    auto opts = xc.options();
    auto h = torch::empty({rows, D}, opts);
    auto q = torch::empty({rows, D}, opts);
    auto k = torch::empty({rows, D}, opts);
    auto v = torch::empty({rows, D}, opts);
    auto ctx = torch::empty({rows, D}, opts);
    auto x1 = torch::empty({rows, D}, opts);
    auto ff = torch::empty({rows, F}, opts);

    // attention sub-block
    launch_layernorm(xc, g1, be1, h, rows, D, (float)eps1);
    launch_gemm(h, wqc, bqc, nullptr, q, rows, D, D, ACT_NONE);
    launch_gemm(h, wkc, bkc, nullptr, k, rows, D, D, ACT_NONE);
    launch_gemm(h, wvc, bvc, nullptr, v, rows, D, D, ACT_NONE);
    float scale = 1.0f / sqrtf((float)hd);
    dim3 agrid(S, H, B);
    attention_row_kernel<<<agrid, ATTN_THREADS, attn_smem>>>(q.data_ptr<float>(), k.data_ptr<float>(),
                                                             v.data_ptr<float>(), ctx.data_ptr<float>(),
                                                             S, D, hd, scale);
    launch_gemm(ctx, woc, boc, xc.data_ptr<float>(), x1, rows, D, D, ACT_NONE);

    // feed-forward sub-block
    launch_layernorm(x1, g2, be2, h, rows, D, (float)eps2);
    if (F > 0) {
        launch_gemm(h, w1c, b1c, nullptr, ff, rows, F, D, ACT_GELU);
    }
    launch_gemm(ff, w2c, b2c, x1.data_ptr<float>(), out, rows, D, F, ACT_NONE);
    return out;
}
"""

cpp_source = """
torch::Tensor transformer_block_forward(torch::Tensor x,
                                        torch::Tensor ln1_w, torch::Tensor ln1_b,
                                        torch::Tensor wq, torch::Tensor bq,
                                        torch::Tensor wk, torch::Tensor bk,
                                        torch::Tensor wv, torch::Tensor bv,
                                        torch::Tensor wo, torch::Tensor bo,
                                        torch::Tensor ln2_w, torch::Tensor ln2_b,
                                        torch::Tensor w1, torch::Tensor b1,
                                        torch::Tensor w2, torch::Tensor b2,
                                        int64_t num_heads, double eps1, double eps2);
"""

transformer_module = load_inline(
    name="oakb_level3_3_transformerblock",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["transformer_block_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, d_model, num_heads, ff_dim):
        super().__init__()
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, ff_dim)
        self.fc2 = nn.Linear(ff_dim, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return transformer_module.transformer_block_forward(
            x,
            self.ln1.weight, self.ln1.bias,
            self.q_proj.weight, self.q_proj.bias,
            self.k_proj.weight, self.k_proj.bias,
            self.v_proj.weight, self.v_proj.bias,
            self.out_proj.weight, self.out_proj.bias,
            self.ln2.weight, self.ln2.bias,
            self.fc1.weight, self.fc1.bias,
            self.fc2.weight, self.fc2.bias,
            self.num_heads, self.ln1.eps, self.ln2.eps,
        )
