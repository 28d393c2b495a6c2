// Hand-written CUDA kernels for the runtime's CUDA launch-path tests.
// Compiled at build time by nvcc into a cubin (sm_90a, sm_90) and PTX
// (compute_80), then packed into bundles by the tests; the runtime never sees
// this source. extern "C": the entry points are the plain names.
//
// Parameter layouts (what cuFuncGetParamInfo reports, and what the tests put
// in Launch.param_slots):
//   axpy(float a, const float* x, float* y, int n):  (0,4) (8,8) (16,8) (24,4), 28 bytes
//   gemm_f32(const float* A, const float* B, float* C, int M, int N, int K):
//       (0,8) (8,8) (16,8) (24,4) (28,4) (32,4), 36 bytes

extern "C" __global__ void axpy(float a, const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// C[M,N] = A[M,K] * B[K,N], row-major fp32. One 128x128 tile of C per block
// of 256 threads, each thread an 8x8 sub-tile; A and B tiles of depth 64 in
// dynamic shared memory: (128*64 + 64*128) * 4 = 64 KiB, above the 48 KiB a
// launch gets without the opt-in attribute. Needs M, N % 128 == 0, K % 64 == 0
// (the bundle's signature says so, and launch validation enforces it).
constexpr int kBM = 128, kBN = 128, kBK = 64, kTM = 8, kTN = 8;

extern "C" __global__ void __launch_bounds__(256) gemm_f32(const float* __restrict__ A, const float* __restrict__ B,
                                                           float* __restrict__ C, int M, int N, int K) {
  extern __shared__ float smem[];
  float* As = smem;              // [kBK][kBM], A tile transposed
  float* Bs = smem + kBK * kBM;  // [kBK][kBN]
  const int tid = threadIdx.x;
  const int tr = tid / (kBN / kTN);  // 0..15: row group
  const int tc = tid % (kBN / kTN);  // 0..15: column group
  const int row0 = blockIdx.y * kBM, col0 = blockIdx.x * kBN;
  float acc[kTM][kTN];
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j) acc[i][j] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kBK) {
    for (int e = tid; e < kBM * kBK; e += blockDim.x) {
      int r = e / kBK, c = e % kBK;
      As[c * kBM + r] = A[(size_t)(row0 + r) * K + k0 + c];
    }
    for (int e = tid; e < kBK * kBN; e += blockDim.x) {
      int r = e / kBN, c = e % kBN;
      Bs[r * kBN + c] = B[(size_t)(k0 + r) * N + col0 + c];
    }
    __syncthreads();
#pragma unroll 4
    for (int k = 0; k < kBK; ++k) {
      float a[kTM], b[kTN];
#pragma unroll
      for (int i = 0; i < kTM; ++i) a[i] = As[k * kBM + tr * kTM + i];
#pragma unroll
      for (int j = 0; j < kTN; ++j) b[j] = Bs[k * kBN + tc * kTN + j];
#pragma unroll
      for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j) C[(size_t)(row0 + tr * kTM + i) * N + col0 + tc * kTN + j] = acc[i][j];
}
