// What a compiled program allocates per rank besides the training state: the emitter reports it
// for each pipeline stage, the memory plan (RankMemory.h) adds it to the state's bytes.
#pragma once

#include <cstdint>

namespace megac {

/// What the emitted program has the runtime allocate per rank besides the training state, per
/// pipeline stage (one entry without pp): the compiled functions' workspace, the pipeline
/// executor's stashes and sent / received buffers (megart/pipeline_buffers.h), and the device
/// copies of a microbatch's token ids and labels.
struct StageBuffers {
  int64_t workspaceBytes = 0, activationBytes = 0, communicationBytes = 0;
  int64_t dataBytesPerMicrobatch = 0;
  int64_t microbatches = 0; // per iteration and dp rank where the program fixes it (pp), else 0
};

} // namespace megac
