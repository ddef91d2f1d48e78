// The CUDA backend of the runtime: GPU memory, the compute stream, NCCL communicators.
#pragma once

#include "megart/device.h"

#include <cuda_runtime.h>
#include <string>

namespace megart::cuda {

// The process's GPU (chosen by the local rank under mpirun: OMPI_COMM_WORLD_LOCAL_RANK, else
// device 0); made on first use. Throws megart::Error when there is no usable CUDA device.
Device &device();

// Whether a CUDA device can be used here; when not, `why` says why (for skipping tests).
bool available(std::string *why = nullptr);

// Throws megart::Error "CUDA error in <what>: <cudaGetErrorString>" unless status is success.
void check(cudaError_t status, const char *what);

} // namespace megart::cuda
