// Functions of kernels/ headers that run on both sides: the host code that prepares data
// for the kernels (and tests them) compiles the same definitions the kernels use.
#pragma once

#if defined(__CUDACC__)
#define SPECULA_HD __host__ __device__ __forceinline__
#else
#define SPECULA_HD inline
#endif
