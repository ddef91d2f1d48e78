// The CUDA backend of the runtime: GPU memory, the compute stream, NCCL communicators.
#pragma once

#include "megart/device.h"

#include <cuda_runtime.h>
#include <string>

namespace megart::cuda {

// The process's GPU (chosen by the launcher's local rank: OMPI_COMM_WORLD_LOCAL_RANK,
// MPI_LOCALRANKID, PMI_LOCAL_RANK, PALS_LOCAL_RANKID, SLURM_LOCALID or LOCAL_RANK, else device
// 0); made on first use. Throws megart::Error when there is no usable CUDA device, or when this
// node runs more ranks than it has GPUs.
Device &device();

// Whether a CUDA device can be used here; when not, `why` says why (for skipping tests).
// False (why: the reason) when this machine has no GPU or no NVIDIA driver; throws megart::Error
// when a driver is loaded but CUDA cannot use it (a driver/toolkit mismatch is not "no GPU").
bool available(std::string *why = nullptr);

// Throws megart::Error "CUDA error in <what>: <cudaGetErrorString>" unless status is success.
void check(cudaError_t status, const char *what);

// Blocks until the work queued on `stream` is done, polling with short sleeps; throws
// megart::Error naming `what` and comm_activity() when it takes longer than the device's
// timeout (Device::set_timeout; 600 s until set), or "CUDA error in <what>" when the stream
// reports a fault. Every host wait of the backend goes through it: the queued work may hold
// NCCL collectives waiting on a peer rank that has stopped.
void wait_for_stream(cudaStream_t stream, const char *what);

} // namespace megart::cuda
