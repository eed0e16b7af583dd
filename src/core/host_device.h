// DG_HOST_DEVICE marks a function that compiles for the host and, under nvcc, for the device too: one body shared by
// a CPU reference and its kernel (the decide rules, top-k's rule, the synthetic weights' generator).
#pragma once

#if defined(__CUDACC__)
#define DG_HOST_DEVICE __host__ __device__
#else
#define DG_HOST_DEVICE
#endif
