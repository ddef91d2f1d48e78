// The whole-program view of a pipelined ProgramDesc (pipeline_parallel_size > 1): checks that
// its stages fit together, and which stages hold each checkpoint tensor (a tied weight such as
// GPT-2's wte is held by more than one).
#pragma once

#include "megart/program.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace megart {

// Throws megart::Error ("compiled program: ...; regenerate with megac compile") unless: stages
// and num_microbatches (>= 1) and virtual_pipeline_size (>= 1) are set; every stage has
// parameters and passes validate_pipeline_stage; chunk c's output is as big as chunk c + 1's
// input; every send has its matching receive on the peer, in the same order per (pair of ranks,
// kind), so each message lands in the buffer meant for it; and a tensor held by several stages
// has the same blocks on each. Local (no communication): every rank checks every stage.
void validate_pipeline_program(const ProgramDesc &program);

// Checkpoint tensor name -> the stages (pp ranks, ascending) whose tables hold it.
std::map<std::string, std::vector<int64_t>> tensor_stages(const ProgramDesc &program, bool frozen = false);

// Elements of the checkpoint tensors of one stage / of the whole model (a tied tensor once).
int64_t stage_tensor_elements(const PipelineStageDesc &stage);
int64_t model_tensor_elements(const ProgramDesc &program);
int64_t model_tensor_count(const ProgramDesc &program);

// "pp 2 x vpp 1, 1f1b schedule, 4 microbatches; stage 0 holds chunks 0 (N parameters); ..."
std::string describe_pipeline(const ProgramDesc &program);

} // namespace megart
