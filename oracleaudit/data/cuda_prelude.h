// oracleaudit's CUDA prelude for libclang: parsing device code without a CUDA installation.
//
// The libclang wheel carries libclang.so but not clang's resource headers (__clang_cuda_runtime_wrapper.h,
// __clang_cuda_builtin_vars.h, ...), and the CUDA SDK headers are written for nvcc. oracleaudit therefore
// parses the device-only view of a source with `-x cuda --cuda-device-only -nocudainc -nocudalib` and
// force-includes this file, which declares the CUDA surface that kernels use with clang's own CUDA
// attributes. Declarations only: nothing here is compiled into anything; it exists so that libclang can
// give every expression in a kernel its real type (float, int, __half, ...).
#pragma clang system_header
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __align__(n) __attribute__((aligned(n)))
#define __CUDACC__ 1
#define INFINITY __builtin_huge_valf()
#define NAN __builtin_nanf("")
#define FLT_MAX 3.402823466e+38F
#define FLT_MIN 1.175494351e-38F
#define FLT_EPSILON 1.192092896e-07F
#define DBL_MAX 1.7976931348623158e+308
#define INT_MAX 2147483647
#define INT_MIN (-INT_MAX - 1)
#define CUDART_INF_F __builtin_huge_valf()
#define M_PI 3.14159265358979323846
#define M_SQRT1_2 0.70710678118654752440
#define M_2_SQRTPI 1.12837916709551257390
#define WARP_SIZE_PRELUDE 32
typedef __SIZE_TYPE__ size_t;
typedef long long int64_t;
typedef int int32_t;
typedef unsigned long long uint64_t;
typedef unsigned int uint32_t;
typedef short int16_t;
typedef unsigned char uint8_t;
typedef signed char int8_t;

struct uint3 { unsigned int x, y, z; };
struct dim3 { unsigned int x, y, z;
  __host__ __device__ dim3(unsigned int x = 1, unsigned int y = 1, unsigned int z = 1) : x(x), y(y), z(z) {} };
extern const __device__ uint3 threadIdx;
extern const __device__ uint3 blockIdx;
extern const __device__ dim3 blockDim;
extern const __device__ dim3 gridDim;
extern const __device__ int warpSize;

#define OA_VEC2(T, N) struct __align__(2 * sizeof(T)) N { T x, y; }; \
  __host__ __device__ N make_##N(T x, T y);
#define OA_VEC4(T, N) struct __align__(4 * sizeof(T)) N { T x, y, z, w; }; \
  __host__ __device__ N make_##N(T x, T y, T z, T w);
OA_VEC2(float, float2) OA_VEC4(float, float4) OA_VEC2(int, int2) OA_VEC4(int, int4)
OA_VEC2(double, double2) OA_VEC2(unsigned int, uint2) OA_VEC4(unsigned int, uint4)
struct float3 { float x, y, z; }; __host__ __device__ float3 make_float3(float, float, float);
struct int3 { int x, y, z; }; __host__ __device__ int3 make_int3(int, int, int);

struct __half { unsigned short __x;
  __host__ __device__ __half(); __host__ __device__ __half(float);
  __host__ __device__ operator float() const; };
struct __half2 { __half x, y; };
struct __nv_bfloat16 { unsigned short __x;
  __host__ __device__ __nv_bfloat16(); __host__ __device__ __nv_bfloat16(float);
  __host__ __device__ operator float() const; };
typedef __half half;
__host__ __device__ __half __float2half(float); __host__ __device__ float __half2float(__half);
__host__ __device__ __nv_bfloat16 __float2bfloat16(float); __host__ __device__ float __bfloat162float(__nv_bfloat16);
__device__ __half __hadd(__half, __half); __device__ __half __hmul(__half, __half);

#define OA_F1(name) __host__ __device__ float name(float); __host__ __device__ double name(double);
#define OA_F1F(name) __host__ __device__ float name(float);
#define OA_F1D(name) __host__ __device__ double name(double);
#define OA_F2F(name) __host__ __device__ float name(float, float);
#define OA_F2D(name) __host__ __device__ double name(double, double);
OA_F1F(expf) OA_F1F(exp2f) OA_F1F(expm1f) OA_F1F(logf) OA_F1F(log2f) OA_F1F(log10f) OA_F1F(log1pf)
OA_F1F(sqrtf) OA_F1F(rsqrtf) OA_F1F(cbrtf) OA_F1F(sinf) OA_F1F(cosf) OA_F1F(tanf) OA_F1F(tanhf)
OA_F1F(sinhf) OA_F1F(coshf) OA_F1F(asinf) OA_F1F(acosf) OA_F1F(atanf) OA_F1F(erff) OA_F1F(erfcf)
OA_F1F(fabsf) OA_F1F(floorf) OA_F1F(ceilf) OA_F1F(roundf) OA_F1F(truncf) OA_F1F(rintf) OA_F1F(__expf)
OA_F1F(__logf) OA_F1F(__exp10f) OA_F1F(__log2f) OA_F1F(__sinf) OA_F1F(__cosf) OA_F1F(__tanf)
OA_F1F(__frsqrt_rn) OA_F1F(__fsqrt_rn) OA_F1F(__frcp_rn) OA_F1F(__saturatef) OA_F1F(normcdff)
OA_F2F(powf) OA_F2F(fmaxf) OA_F2F(fminf) OA_F2F(fmodf) OA_F2F(atan2f) OA_F2F(__fdividef) OA_F2F(__powf)
OA_F2F(copysignf) OA_F2F(fdividef) OA_F2F(__fadd_rn) OA_F2F(__fmul_rn) OA_F2F(__fdiv_rn) OA_F2F(__fsub_rn)
OA_F1D(exp) OA_F1D(log) OA_F1D(sqrt) OA_F1D(rsqrt) OA_F1D(tanh) OA_F1D(erf) OA_F1D(fabs) OA_F1D(floor)
OA_F1D(ceil) OA_F1D(log1p) OA_F1D(expm1) OA_F1D(sin) OA_F1D(cos) OA_F1D(round)
OA_F2D(pow) OA_F2D(fmax) OA_F2D(fmin) OA_F2D(fmod) OA_F2D(atan2)
__host__ __device__ float fmaf(float, float, float); __host__ __device__ double fma(double, double, double);
__host__ __device__ float __fmaf_rn(float, float, float);
__host__ __device__ float exp(float); __host__ __device__ float log(float); __host__ __device__ float sqrt(float);
__host__ __device__ float tanh(float); __host__ __device__ float fabs(float); __host__ __device__ float erf(float);
__host__ __device__ float pow(float, float); __host__ __device__ float fmax(float, float);
__host__ __device__ float fmin(float, float);
__host__ __device__ int abs(int); __host__ __device__ long long llabs(long long);
__host__ __device__ int min(int, int); __host__ __device__ int max(int, int);
__host__ __device__ unsigned int min(unsigned int, unsigned int); __host__ __device__ unsigned int max(unsigned int, unsigned int);
__host__ __device__ long long min(long long, long long); __host__ __device__ long long max(long long, long long);
__host__ __device__ float min(float, float); __host__ __device__ float max(float, float);
__host__ __device__ double min(double, double); __host__ __device__ double max(double, double);
__device__ int __float2int_rn(float); __device__ int __float2int_rz(float); __device__ float __int2float_rn(int);
__device__ unsigned int __float_as_uint(float); __device__ float __uint_as_float(unsigned int);
__device__ int __float_as_int(float); __device__ float __int_as_float(int);
__device__ int __popc(unsigned int); __device__ int __clz(int); __device__ int __ffs(int);
__host__ __device__ bool isnan(float); __host__ __device__ bool isinf(float); __host__ __device__ bool isfinite(float);
__host__ __device__ bool isnan(double); __host__ __device__ bool isinf(double); __host__ __device__ bool isfinite(double);
__host__ __device__ int signbit(float);

__device__ void __syncthreads(); __device__ int __syncthreads_or(int); __device__ int __syncthreads_and(int);
__device__ int __syncthreads_count(int);
__device__ void __syncwarp(unsigned int mask = 0xffffffffu);
__device__ void __threadfence(); __device__ void __threadfence_block();
__device__ unsigned int __activemask(); __device__ unsigned int __ballot_sync(unsigned int, int);
__device__ int __all_sync(unsigned int, int); __device__ int __any_sync(unsigned int, int);
template <class T> __device__ T __shfl_sync(unsigned int mask, T var, int src, int width = 32);
template <class T> __device__ T __shfl_up_sync(unsigned int mask, T var, unsigned int delta, int width = 32);
template <class T> __device__ T __shfl_down_sync(unsigned int mask, T var, unsigned int delta, int width = 32);
template <class T> __device__ T __shfl_xor_sync(unsigned int mask, T var, int lane_mask, int width = 32);
template <class T> __device__ T __ldg(const T* ptr);
#define OA_ATOMIC(name, T) __device__ T name(T* address, T val);
OA_ATOMIC(atomicAdd, float) OA_ATOMIC(atomicAdd, double) OA_ATOMIC(atomicAdd, int)
OA_ATOMIC(atomicAdd, unsigned int) OA_ATOMIC(atomicAdd, unsigned long long)
OA_ATOMIC(atomicSub, int) OA_ATOMIC(atomicSub, unsigned int)
OA_ATOMIC(atomicMax, int) OA_ATOMIC(atomicMax, unsigned int) OA_ATOMIC(atomicMax, long long)
OA_ATOMIC(atomicMin, int) OA_ATOMIC(atomicMin, unsigned int) OA_ATOMIC(atomicMin, long long)
OA_ATOMIC(atomicExch, int) OA_ATOMIC(atomicExch, unsigned int) OA_ATOMIC(atomicExch, float)
OA_ATOMIC(atomicOr, int) OA_ATOMIC(atomicAnd, int) OA_ATOMIC(atomicXor, int)
__device__ int atomicCAS(int* address, int compare, int val);
__device__ unsigned int atomicCAS(unsigned int* address, unsigned int compare, unsigned int val);
__device__ unsigned long long atomicCAS(unsigned long long* address, unsigned long long compare, unsigned long long val);
extern "C" __device__ int printf(const char*, ...);
extern "C" __device__ void __assertfail(const char*, const char*, unsigned, const char*, size_t);
#define assert(e) ((void)0)
namespace std {
template <class T> __host__ __device__ const T& min(const T& a, const T& b);
template <class T> __host__ __device__ const T& max(const T& a, const T& b);
template <class T> __host__ __device__ T abs(T);
__host__ __device__ float exp(float); __host__ __device__ float sqrt(float); __host__ __device__ float log(float);
__host__ __device__ float tanh(float); __host__ __device__ float fabs(float); __host__ __device__ float pow(float, float);
template <class T> struct numeric_limits { __host__ __device__ static T max(); __host__ __device__ static T min();
  __host__ __device__ static T lowest(); __host__ __device__ static T infinity(); __host__ __device__ static T epsilon(); };
}
