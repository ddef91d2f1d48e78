// The machine a plan is simulated on (megac simulate --cluster FILE.yaml): one device kind,
// nodes of `gpusPerNode` devices, a link inside a node and one across nodes. Every number comes
// from a vendor specification, a published measurement or `megac calibrate`; the file says which
// (docs/simulate.md has the schema). Nothing here is fitted to the results it is checked against.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace megac::sim {

/// A collective's path: bus bandwidth as nccl-tests reports it (algorithm bandwidth x the ring
/// factor) and a latency per ring step.
struct Link {
  double busBandwidthGBps = 0; // 1e9 bytes per second
  double latencyUs = 0;
};

struct Cluster {
  std::string name;
  std::string device;
  int64_t devicesPerNode = 1;
  // Dense peak of one device, 1e12 FLOP/s: for 16-bit GEMMs (bf16 / fp16) and fp32 ones.
  double peakTflops16 = 0, peakTflops32 = 0;
  // The fraction of peak a large GEMM reaches; GEMMs with a side below `gemmSaturation` rows
  // reach proportionally less (a simple size curve, documented in docs/simulate.md).
  double gemmEfficiency = 1;
  int64_t gemmSaturation = 0;
  // Tile and wave quantization (NVIDIA's GEMM guide): a GEMM's output is computed in tiles of
  // `gemmTileRows` x `gemmTileCols`, `gemmTilesAtOnce` at a time (one wave: a tile per SM); a
  // partly filled tile or wave costs a full one. `gemmEfficiency` is then the rate of full waves
  // of full tiles. 0 tiles at once: no quantization (a CPU).
  int64_t gemmTileRows = 1, gemmTileCols = 1, gemmTilesAtOnce = 0;
  // The fraction of peak the attention kernels (forward and backward, FLOPs counted as the GEMMs
  // of a flash kernel: docs/simulate.md) reach: their softmax and masking make them slower than
  // a plain GEMM.
  double attentionEfficiency = 1;
  double memoryBandwidthGBps = 0; // what memory-bound kernels stream at
  double memoryGiB = 0;           // per device
  double kernelLaunchUs = 0;      // fixed cost of each kernel
  Link intraNode, interNode;
};

/// The cluster file at `nameOrPath`, or CLUSTERDIR/NAME.yaml for a bare name (the driver's
/// clusters/, in the source tree or installed).
llvm::Expected<Cluster> loadCluster(llvm::StringRef nameOrPath, llvm::StringRef clusterDir);
/// Parses a cluster file's text; `where` names it in errors.
llvm::Expected<Cluster> parseCluster(llvm::StringRef yaml, llvm::StringRef where);

} // namespace megac::sim
