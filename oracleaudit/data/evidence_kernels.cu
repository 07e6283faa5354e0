// The element-wise part of `evidence.measure` in four kernels (oracleaudit/evidence_kernels.py loads this
// file, built by nvcc into a shared library, through ctypes). The torch version in evidence.py is the
// specification; these kernels compute the same quantities:
//   counts      the eight flag counts of `_measure`, Σ[out == 0], Σ[ref != 0]
//   histogram   for each element of `rest` the first grid index t_k with d <= t_k + |t_k * r| (G: none)
//   statistics  float64 maxima, sums and scaled sums of squares over the finite pairs (`_statistics`)
//   candidates  the points (r, d) of `rest` with d > 0 not dominated by a point of a lower bin
//               (`_bin_filter`), compacted in any order (the caller sorts them)
// Every operation on the compared values uses the _rn intrinsics, so each is rounded as PyTorch's kernels
// round it (no contraction into fused multiply-adds), whatever nvcc's flags. Integer counts are summed
// with atomics (exact); floating-point sums and maxima go through per-block partials reduced in a fixed
// order, so a result depends only on the data and n, never on scheduling.

#include <cuda_runtime.h>
#include <stdint.h>

#define THREADS 256
#define MAX_BLOCKS 1024
#define MAX_GRID 64
#define SUB_BINS 64                       // bins per binade of r: must equal evidence._SUB_BINS
#define CODE_LOW (-1073 * SUB_BINS)       // frexp exponents of positive finite doubles lie in [-1073, 1024]
#define CODE_HIGH (1024 * SUB_BINS + SUB_BINS - 1)
#define N_BINS (CODE_HIGH - CODE_LOW + 2) // bin 0 holds r == 0
#define N_COUNTS 10
#define N_PART1 6
#define N_PART2 4

// the workspace, in 8-byte words: counters, then the bins, then the per-block partials and the scales
#define W_COUNTS 0                                   // N_COUNTS counts
#define W_HIST (W_COUNTS + N_COUNTS)                 // MAX_GRID + 1 histogram bins
#define W_SURVIVORS (W_HIST + MAX_GRID + 1)          // candidates found (may exceed the capacity)
#define W_KEY_HIGH (W_SURVIVORS + 1)                 // 1 + the highest bin used (0: none)
#define W_KEY_LOW (W_KEY_HIGH + 1)                   // N_BINS - the lowest bin used
#define W_ZEROED (W_KEY_LOW + 1)                     // words up to here are zeroed before each call
#define W_BINS W_ZEROED
#define W_PART1 (W_BINS + N_BINS)
#define W_PART2 (W_PART1 + MAX_BLOCKS * N_PART1)
#define W_SCALES (W_PART2 + MAX_BLOCKS * N_PART2)
#define W_TOTAL (W_SCALES + N_PART1)

// the result, in doubles: counts, histogram (G + 1), survivors, statistics; then the candidate pairs
#define R_STATS 8

struct Grid {
    double t[MAX_GRID];
    int size;
};

__device__ __forceinline__ float sub_rn(float x, float y) { return __fsub_rn(x, y); }
__device__ __forceinline__ double sub_rn(double x, double y) { return __dsub_rn(x, y); }
__device__ __forceinline__ float mul_rn(float x, float y) { return __fmul_rn(x, y); }
__device__ __forceinline__ double mul_rn(double x, double y) { return __dmul_rn(x, y); }
__device__ __forceinline__ float add_rn(float x, float y) { return __fadd_rn(x, y); }
__device__ __forceinline__ double add_rn(double x, double y) { return __dadd_rn(x, y); }
__device__ __forceinline__ float abs_of(float x) { return fabsf(x); }
__device__ __forceinline__ double abs_of(double x) { return fabs(x); }

// The bin of r (finite, >= 0): 0 for r == 0, else ordered by (binade, SUB_BINS steps of its mantissa).
__device__ __forceinline__ int bin_of(double r) {
    if (!(r > 0)) return 0;
    int e;
    double m = frexp(r, &e);  // m in [0.5, 1), exact
    int sub = min(max((int)(m * (2 * SUB_BINS)), SUB_BINS), 2 * SUB_BINS - 1) - SUB_BINS;
    return e * SUB_BINS + sub - CODE_LOW + 1;
}

// Fixed-order block reductions (every thread gets the result).
__device__ double block_sum(double v, double* shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) shared[threadIdx.x] = __dadd_rn(shared[threadIdx.x], shared[threadIdx.x + s]);
        __syncthreads();
    }
    double out = shared[0];
    __syncthreads();
    return out;
}

__device__ double block_max(double v, double* shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) shared[threadIdx.x] = fmax(shared[threadIdx.x], shared[threadIdx.x + s]);
        __syncthreads();
    }
    double out = shared[0];
    __syncthreads();
    return out;
}

__device__ unsigned long long block_count(unsigned long long v, unsigned long long* shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
        __syncthreads();
    }
    unsigned long long out = shared[0];
    __syncthreads();
    return out;
}

// Pass 1: counts, histogram, maxima and sums, the bins' maxima of d.
template <typename T>
__global__ void __launch_bounds__(THREADS) pass1(const T* __restrict__ a, const T* __restrict__ b, long long n,
                                                 Grid grid, unsigned long long* work) {
    __shared__ unsigned int hist[MAX_GRID + 1];
    __shared__ double shared[THREADS];
    __shared__ unsigned long long shared_count[THREADS];
    for (int k = threadIdx.x; k <= grid.size; k += THREADS) hist[k] = 0;
    __syncthreads();
    unsigned long long* bins = work + W_BINS;
    unsigned int c[N_COUNTS] = {0};
    double max_diff = 0, max_ref = 0, max_out = 0, max_rel = -1, sum_ref = 0, sum_diff = 0;
    int key_high = -1, key_low = N_BINS;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n; i += (long long)gridDim.x * THREADS) {
        T x = a[i], y = b[i];
        bool eq = x == y;
        bool nan_x = isnan(x), nan_y = isnan(y);
        bool fin = isfinite(x) && isfinite(y);
        T d = abs_of(sub_rn(x, y));
        T r = abs_of(y);
        bool d_fin = isfinite(d);
        c[0] += !eq;
        c[1] += nan_x && !nan_y;
        c[2] += nan_y && !nan_x;
        c[3] += nan_x && nan_y;
        c[4] += !eq && !fin && !nan_x && !nan_y;
        c[5] += eq && isinf(x);
        c[6] += fin && !d_fin;
        c[7] += fin;
        c[8] += x == 0;
        c[9] += y != 0;
        if (fin && !eq && d_fin) {  // `rest`
            int first = grid.size;
            for (int k = 0; k < grid.size; ++k) {
                T t = (T)grid.t[k];
                if (d <= add_rn(t, abs_of(mul_rn(t, r)))) {
                    first = k;
                    break;
                }
            }
            atomicAdd(&hist[first], 1u);
            if (d > 0) {
                int key = bin_of((double)r);
                unsigned long long bits = (unsigned long long)__double_as_longlong((double)d);
                if (bits > bins[key]) atomicMax(&bins[key], bits);  // d >= 0: its bits order as its values
                key_high = max(key_high, key);
                key_low = min(key_low, key);
            }
        }
        if (fin) {
            double xd = (double)x, yd = (double)y;
            double diff = fabs(__dsub_rn(xd, yd)), rb = fabs(yd);
            max_diff = fmax(max_diff, diff);
            max_ref = fmax(max_ref, rb);
            max_out = fmax(max_out, fabs(xd));
            if (rb > 0) max_rel = fmax(max_rel, __ddiv_rn(diff, rb));
            sum_ref = __dadd_rn(sum_ref, rb);
            sum_diff = __dadd_rn(sum_diff, diff);
        }
    }
    for (int j = 0; j < N_COUNTS; ++j) {
        unsigned long long total = block_count(c[j], shared_count);
        if (threadIdx.x == 0 && total) atomicAdd(&work[W_COUNTS + j], total);
    }
    __syncthreads();
    for (int k = threadIdx.x; k <= grid.size; k += THREADS)
        if (hist[k]) atomicAdd(&work[W_HIST + k], (unsigned long long)hist[k]);
    // the used key range (unsigned atomics on values that only grow)
    if (key_high >= 0) atomicMax(&work[W_KEY_HIGH], (unsigned long long)(key_high + 1));
    if (key_low < N_BINS) atomicMax(&work[W_KEY_LOW], (unsigned long long)(N_BINS - key_low));
    double* part = (double*)(work + W_PART1) + (long long)blockIdx.x * N_PART1;
    double v0 = block_max(max_diff, shared), v1 = block_max(max_ref, shared), v2 = block_max(max_out, shared);
    double v3 = block_max(max_rel, shared), v4 = block_sum(sum_ref, shared), v5 = block_sum(sum_diff, shared);
    if (threadIdx.x == 0) {
        part[0] = v0; part[1] = v1; part[2] = v2; part[3] = v3; part[4] = v4; part[5] = v5;
    }
}

// One block: reduce pass 1's partials into the scales, and turn the used bins into exclusive prefix maxima
// (bins[k] := the largest d of all bins below k).
__global__ void __launch_bounds__(THREADS) finish1(int blocks, unsigned long long* work) {
    __shared__ double shared[THREADS];
    __shared__ unsigned long long shared_max[THREADS];
    const double* part = (const double*)(work + W_PART1);
    double* scales = (double*)(work + W_SCALES);
    for (int j = 0; j < N_PART1; ++j) {
        bool is_sum = j >= 4;
        double v = is_sum ? 0.0 : (j == 3 ? -1.0 : 0.0);
        for (int k = threadIdx.x; k < blocks; k += THREADS) {
            double p = part[k * N_PART1 + j];
            v = is_sum ? __dadd_rn(v, p) : fmax(v, p);
        }
        double total = is_sum ? block_sum(v, shared) : block_max(v, shared);
        if (threadIdx.x == 0) scales[j] = total;
    }
    if (work[W_KEY_HIGH] == 0) return;  // no candidate
    long long high = (long long)work[W_KEY_HIGH] - 1;
    long long low = N_BINS - (long long)work[W_KEY_LOW];
    unsigned long long* bins = work + W_BINS;
    long long span = high - low + 1;
    long long chunk = (span + THREADS - 1) / THREADS;
    long long begin = low + threadIdx.x * chunk;
    long long end = min(begin + chunk, high + 1);
    unsigned long long mine = 0;
    for (long long k = begin; k < end; ++k) mine = max(mine, bins[k]);
    // exclusive scan of the chunks' maxima (Hillis-Steele on max)
    shared_max[threadIdx.x] = mine;
    __syncthreads();
    for (int s = 1; s < THREADS; s <<= 1) {
        unsigned long long other = threadIdx.x >= s ? shared_max[threadIdx.x - s] : 0;
        __syncthreads();
        shared_max[threadIdx.x] = max(shared_max[threadIdx.x], other);
        __syncthreads();
    }
    unsigned long long running = threadIdx.x > 0 ? shared_max[threadIdx.x - 1] : 0;
    for (long long k = begin; k < end; ++k) {
        unsigned long long v = bins[k];
        bins[k] = running;
        running = max(running, v);
    }
}

// Pass 2: scaled sums of squares and the dot product; the candidates that beat every lower bin.
template <typename T>
__global__ void __launch_bounds__(THREADS) pass2(const T* __restrict__ a, const T* __restrict__ b, long long n,
                                                 unsigned long long* work, double* pairs, long long capacity) {
    __shared__ double shared[THREADS];
    const double* scales = (const double*)(work + W_SCALES);
    double sd = scales[0] > 0 ? scales[0] : 1.0, sb = scales[1] > 0 ? scales[1] : 1.0;
    double sa = scales[2] > 0 ? scales[2] : 1.0;
    const unsigned long long* lower = work + W_BINS;
    double ssd = 0, ssb = 0, ssa = 0, dot = 0;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n; i += (long long)gridDim.x * THREADS) {
        T x = a[i], y = b[i];
        if (!(isfinite(x) && isfinite(y))) continue;
        double xd = (double)x, yd = (double)y;
        double qd = __ddiv_rn(fabs(__dsub_rn(xd, yd)), sd), qb = __ddiv_rn(yd, sb), qa = __ddiv_rn(xd, sa);
        ssd = __dadd_rn(ssd, __dmul_rn(qd, qd));
        ssb = __dadd_rn(ssb, __dmul_rn(qb, qb));
        ssa = __dadd_rn(ssa, __dmul_rn(qa, qa));
        dot = __dadd_rn(dot, __dmul_rn(qa, qb));
        if (x == y) continue;
        T d = abs_of(sub_rn(x, y));
        if (!isfinite(d) || !(d > 0)) continue;
        double r = (double)abs_of(y), dd = (double)d;
        if ((unsigned long long)__double_as_longlong(dd) > lower[bin_of(r)]) {
            unsigned long long slot = atomicAdd(&work[W_SURVIVORS], 1ull);
            if ((long long)slot < capacity) {
                pairs[2 * slot] = r;
                pairs[2 * slot + 1] = dd;
            }
        }
    }
    double* part = (double*)(work + W_PART2) + (long long)blockIdx.x * N_PART2;
    double v0 = block_sum(ssd, shared), v1 = block_sum(ssb, shared), v2 = block_sum(ssa, shared);
    double v3 = block_sum(dot, shared);
    if (threadIdx.x == 0) {
        part[0] = v0; part[1] = v1; part[2] = v2; part[3] = v3;
    }
}

// One block: the result vector (see evidence_kernels.py for its layout).
__global__ void __launch_bounds__(THREADS) finish2(int blocks, int grid_size, const unsigned long long* work,
                                                   double* result) {
    __shared__ double shared[THREADS];
    const double* part = (const double*)(work + W_PART2);
    double sums[N_PART2];
    for (int j = 0; j < N_PART2; ++j) {
        double v = 0;
        for (int k = threadIdx.x; k < blocks; k += THREADS) v = __dadd_rn(v, part[k * N_PART2 + j]);
        sums[j] = block_sum(v, shared);
    }
    if (threadIdx.x != 0) return;
    const double* scales = (const double*)(work + W_SCALES);
    double sd = scales[0] > 0 ? scales[0] : 1.0, sb = scales[1] > 0 ? scales[1] : 1.0;
    int at = 0;
    for (int j = 0; j < N_COUNTS; ++j) result[at++] = (double)work[W_COUNTS + j];
    for (int k = 0; k <= grid_size; ++k) result[at++] = (double)work[W_HIST + k];
    result[at++] = (double)work[W_SURVIVORS];
    double na = sqrt(sums[2]), nb = sqrt(sums[1]);
    result[at++] = sd * sqrt(sums[0]);   // ‖diff‖
    result[at++] = sb * nb;              // ‖ref‖
    result[at++] = sums[3] / (na * nb);  // cosine (used only when both norms are > 0)
    result[at++] = scales[0];            // max |diff|
    result[at++] = scales[3];            // max relative (-1: no |ref| > 0)
    result[at++] = scales[4];            // Σ|ref|
    result[at++] = scales[5];            // Σ|diff|
    result[at++] = na;                   // ‖out / max|out|‖ (> 0 iff out has a non-zero finite element)
}

static int blocks_for(long long n) {
    long long blocks = (n + THREADS * 4 - 1) / (THREADS * 4);
    return (int)(blocks < 1 ? 1 : (blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks));
}

template <typename T>
static int run(int device, const T* a, const T* b, long long n, const double* grid, int grid_size,
               unsigned long long* work, double* result, long long capacity, cudaStream_t stream) {
    if (grid_size < 1 || grid_size > MAX_GRID) return (int)cudaErrorInvalidValue;
    cudaError_t err = cudaSetDevice(device);
    if (err != cudaSuccess) return (int)err;
    Grid g;
    for (int k = 0; k < MAX_GRID; ++k) g.t[k] = k < grid_size ? grid[k] : 0.0;
    g.size = grid_size;
    int blocks = blocks_for(n);
    err = cudaMemsetAsync(work, 0, (size_t)(W_ZEROED + N_BINS) * sizeof(unsigned long long), stream);
    if (err != cudaSuccess) return (int)err;
    pass1<T><<<blocks, THREADS, 0, stream>>>(a, b, n, g, work);
    finish1<<<1, THREADS, 0, stream>>>(blocks, work);
    double* pairs = result + N_COUNTS + grid_size + 2 + R_STATS;
    pass2<T><<<blocks, THREADS, 0, stream>>>(a, b, n, work, pairs, capacity);
    finish2<<<1, THREADS, 0, stream>>>(blocks, grid_size, work, result);
    return (int)cudaGetLastError();
}

extern "C" {

long long oa_workspace_words() { return W_TOTAL; }
int oa_max_grid() { return MAX_GRID; }
int oa_sub_bins() { return SUB_BINS; }
const char* oa_error_string(int code) { return cudaGetErrorString((cudaError_t)code); }

int oa_evidence_f32(int device, const float* a, const float* b, long long n, const double* grid, int grid_size,
                    void* work, double* result, long long capacity, void* stream) {
    return run<float>(device, a, b, n, grid, grid_size, (unsigned long long*)work, result, capacity,
                      (cudaStream_t)stream);
}

int oa_evidence_f64(int device, const double* a, const double* b, long long n, const double* grid, int grid_size,
                    void* work, double* result, long long capacity, void* stream) {
    return run<double>(device, a, b, n, grid, grid_size, (unsigned long long*)work, result, capacity,
                       (cudaStream_t)stream);
}

}  // extern "C"
