__global__ void broken_kernel(float* y, int n) {
    int i = threadIdx.x;
    if (i < n) y[i] = (1.0f + ;
}
