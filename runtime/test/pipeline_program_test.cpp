// The checks a pipelined program's tables get before anything runs (one stage's schedule, and
// how the stages fit together), on the hand-written toy pipeline with one thing broken at a
// time; plus the communicator pieces the executor relies on that need no MPI.
#include "megart/grad_norm.h"
#include "megart/pipeline_executor.h"
#include "megart/pipeline_program.h"

#include "expect_error.h"
#include "toy_pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using megart::PipeOp;
using megart::PipeOpKind;
using ::testing::HasSubstr;

namespace {

// Checks stage `rank` of the toy P = 2 pipeline (1F1B, or interleaved with V = 2) after `edit`
// changed its tables.
std::string stage_error(int rank, const std::function<void(toy::Program &)> &edit,
                        bool interleaved = false) {
  toy::Program p;
  if (interleaved)
    toy::build<2, 4>(p, toy::interleaved());
  else
    toy::build<2, 2>(p, toy::one_f_one_b());
  toy::set_closing(p, {}); // the edits index the schedule's steps
  edit(p);
  toy::close_unless_closed(p);
  p.stages[rank].ops = p.ops[rank].data();
  p.stages[rank].num_ops = static_cast<int64_t>(p.ops[rank].size());
  return error_of([&] {
    megart::validate_pipeline_stage(p.stages[rank], rank, 2, p.desc.virtual_pipeline_size, toy::kMicrobatches);
  });
}

std::string program_error(const std::function<void(toy::Program &)> &edit) {
  toy::Program p;
  toy::build<2, 2>(p, toy::one_f_one_b());
  toy::set_closing(p, {}); // the edits index the schedule's steps
  edit(p);
  toy::close_unless_closed(p);
  for (int r = 0; r < 2; ++r) {
    p.stages[r].ops = p.ops[r].data();
    p.stages[r].num_ops = static_cast<int64_t>(p.ops[r].size());
  }
  return error_of([&] { megart::validate_pipeline_program(p.desc); });
}

constexpr const char *kFix = "; regenerate with megac compile";

} // namespace

TEST(PipelineStage, TheToySchedulesAreWellFormed) {
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(stage_error(r, [](toy::Program &) {}), "");
    EXPECT_EQ(stage_error(r, [](toy::Program &) {}, true), "");
  }
  EXPECT_EQ(program_error([](toy::Program &) {}), "");
}

TEST(PipelineStage, OpsThatDoNotBelongHere) {
  EXPECT_EQ(stage_error(0, [](toy::Program &p) { p.ops[0][0].chunk = 1; }),
            std::string("compiled program: pp rank 0's schedule, step 0 (Forward chunk 1 "
                        "microbatch 0): chunk 1 does not run on this rank (the pipeline has 2 "
                        "chunks; chunk c runs on pp rank c % 2)") + kFix);
  EXPECT_EQ(stage_error(1, [](toy::Program &p) { p.ops[1][1].microbatch = 4; }),
            std::string("compiled program: pp rank 1's schedule, step 1 (Forward chunk 1 "
                        "microbatch 4): microbatch 4 is outside 0..3") + kFix);
  EXPECT_THAT(stage_error(0, [](toy::Program &p) { p.ops[0][0].kind = static_cast<PipeOpKind>(-1); }),
              HasSubstr("step 0 (op kind -1 chunk 0 microbatch 0): unknown op kind -1"));
  EXPECT_THAT(stage_error(0, [](toy::Program &p) { p.ops[0][1].peer = 0; }),
              HasSubstr("step 1 (SendActivation chunk 0 microbatch 0): peer is pp rank 0; the "
                        "neighbouring chunk runs on pp rank 1"));
  EXPECT_THAT(stage_error(1, [](toy::Program &p) { p.ops[1].push_back(toy::SA(1, 0)); }),
              HasSubstr("(SendActivation chunk 1 microbatch 0): the last chunk has no next chunk"));
  EXPECT_THAT(stage_error(0, [](toy::Program &p) { p.ops[0].insert(p.ops[0].begin(), toy::RA(0, 0)); }),
              HasSubstr("the first chunk has no previous chunk"));
}

TEST(PipelineStage, OrderAndCompleteness) {
  // Forward of microbatch 1 replaced by a second forward of microbatch 0.
  EXPECT_THAT(stage_error(0, [](toy::Program &p) { p.ops[0][2] = toy::F(0, 0); }),
              HasSubstr("step 2 (Forward chunk 0 microbatch 0): it appears twice"));
  // Rank 1 computes before the activation arrives.
  EXPECT_THAT(stage_error(1, [](toy::Program &p) { std::swap(p.ops[1][0], p.ops[1][1]); }),
              HasSubstr("step 0 (Forward chunk 1 microbatch 0): it runs before its RecvActivation"));
  // Rank 0 runs a backward before its gradient arrives.
  EXPECT_THAT(stage_error(0, [](toy::Program &p) { std::swap(p.ops[0][4], p.ops[0][5]); }),
              HasSubstr("step 4 (Backward chunk 0 microbatch 0): it runs before its RecvGrad"));
  EXPECT_THAT(stage_error(1, [](toy::Program &p) { std::swap(p.ops[1][2], p.ops[1][3]); }),
              HasSubstr("(SendGrad chunk 1 microbatch 0): it sends a gradient before the Backward"));
  EXPECT_THAT(stage_error(0, [](toy::Program &p) { std::swap(p.ops[0][0], p.ops[0][1]); }),
              HasSubstr("it sends an activation before the Forward that computes it"));
  EXPECT_THAT(stage_error(0, [](toy::Program &p) { p.ops[0].insert(p.ops[0].begin(), toy::B(0, 0)); }),
              HasSubstr("step 0 (Backward chunk 0 microbatch 0): it runs before its Forward"));
  EXPECT_EQ(stage_error(0, [](toy::Program &p) { p.ops[0].pop_back(); }),
            std::string("compiled program: pp rank 0's stage: the schedule has no Backward for "
                        "chunk 0 microbatch 3 (every one of the 4 microbatches must pass through "
                        "every chunk)") + kFix);
  EXPECT_THAT(stage_error(1, [](toy::Program &p) { p.ops[1].pop_back(); }, true),
              HasSubstr("the schedule has no SendGrad for chunk 1 microbatch 3"));
}

TEST(PipelineStage, ChunkTables) {
  EXPECT_THAT(stage_error(1, [](toy::Program &p) { p.chunks[1][0].chunk = 3; }, true),
              HasSubstr("pp rank 1's stage: its chunk 0 is chunk 3; pp rank 1 runs chunks 1, 3, "
                        "... in ascending order"));
  EXPECT_THAT(stage_error(0, [](toy::Program &p) { p.chunks[0][0].backward = nullptr; }),
              HasSubstr("chunk 0 has no backward function"));
  EXPECT_THAT(stage_error(0, [](toy::Program &p) { p.chunks[0][0].input_numel = 64; }),
              HasSubstr("chunk 0 has input_numel 64; it must be 0 on the first chunk"));
  EXPECT_THAT(stage_error(1, [](toy::Program &p) { p.stages[1].num_chunks = 2; }),
              HasSubstr("it has 2 chunks; the pipeline has 1 per rank"));
  // The executor refuses what the check refuses.
  toy::Program p;
  toy::build<2, 2>(p, toy::one_f_one_b());
  p.ops[0][0].microbatch = 7;
  expect_error([&] { megart::PipelineExecutor(p.stages.data(), 0, 2, 1, toy::kMicrobatches); },
               {"microbatch 7 is outside 0..3", kFix});
}

TEST(PipelineProgram, StagesMustFitTogether) {
  EXPECT_THAT(program_error([](toy::Program &p) { p.desc.stages = nullptr; }),
              HasSubstr("pipeline_parallel_size is 2 but there are no stages"));
  EXPECT_THAT(program_error([](toy::Program &p) { p.desc.num_microbatches = 0; }),
              HasSubstr("num_microbatches is 0; a pipeline needs at least 1"));
  EXPECT_THAT(program_error([](toy::Program &p) {
                p.chunks[0][0].output_numel = 10;
              }),
              HasSubstr("chunk 0's output has 10 elements of 4 bytes but chunk 1's input has 64 of 4"));
  // Rank 1 takes microbatch 1 before 0: each would land in the other's buffer.
  EXPECT_EQ(program_error([](toy::Program &p) {
              std::vector<PipeOp> &r1 = p.ops[1];
              std::swap_ranges(r1.begin(), r1.begin() + 4, r1.begin() + 4);
            }),
            std::string("compiled program: pp rank 0 sends 4 activations to pp rank 1, which "
                        "receives 4 and they do not pair up: message 0 is chunk 0 microbatch "
                        "0's on the sender, chunk 0 microbatch 1's on the receiver") + kFix);
  EXPECT_THAT(program_error([](toy::Program &p) { p.params[1][0].tp_split_dim = 0; }),
              HasSubstr("tensor 'transformer.wte.weight' is held by stages 0 and 1 in different "
                        "blocks"));
}

TEST(PipelineProgram, TensorsAndTheirStages) {
  toy::Program p;
  toy::build<2, 4>(p, toy::interleaved());
  const auto stages = megart::tensor_stages(p.desc);
  EXPECT_EQ(stages.at("transformer.wte.weight"), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(stages.at("h.2.w"), (std::vector<int64_t>{0}));
  EXPECT_EQ(stages.at("h.3.w"), (std::vector<int64_t>{1}));
  EXPECT_EQ(megart::model_tensor_elements(p.desc), 64 + 4 * 4);
  EXPECT_EQ(megart::model_tensor_count(p.desc), 5);
  EXPECT_EQ(megart::describe_pipeline(p.desc),
            "pp 2 x vpp 2, interleaved schedule, 4 microbatches; stage 0 holds chunks 0, 2 (72 "
            "parameters); stage 1 holds chunks 1, 3 (72 parameters)");
  EXPECT_STREQ(megart::pipe_op_name(PipeOpKind::RecvGrad), "RecvGrad");
}

TEST(PipelineComm, SizeOneAxesHaveNoPeers) {
  megart::SelfCommunicator self;
  float x = 0;
  expect_error([&] { self.isend(&x, 1, 1, 5); }, {"isend with peer 1", "a size-1 axis has no peers"});
  expect_error([&] { self.irecv(&x, 1, 0, 5); }, {"irecv with peer 0"});
  expect_error([&] { self.set_timeout(0); }, {"--distributed-timeout-minutes"});
  EXPECT_EQ(self.timeout(), megart::kDefaultCommTimeoutSeconds);
  self.set_timeout(1.5);
  EXPECT_EQ(self.timeout(), 1.5);
}

TEST(PipelineComm, ActivityNamesWhatRuns) {
  megart::CommActivity a;
  EXPECT_EQ(a.describe(), "");
  a.iteration = 3;
  a.phase = "data-parallel gradient sync";
  EXPECT_EQ(a.describe(), "iteration 3, data-parallel gradient sync");
  a = {3, "pipeline schedule", 7, "RecvGrad", 0, 1};
  EXPECT_EQ(a.describe(), "iteration 3, schedule step 7 (RecvGrad chunk 0 microbatch 1)");
}

TEST(PipelineGradNorm, ATiedWeightCountsOnItsFirstStageOnly) {
  toy::Program p;
  toy::build<2, 2>(p, toy::one_f_one_b());
  megart::ParamStore store(p.stages[1].params, p.stages[1].num_params); // [wte, h.1.w]
  for (int64_t i = 0; i < store.size(); ++i)
    std::fill(store.grad(i), store.grad(i) + store.numel(i), 1.0f);
  megart::SelfCommunicator tp, pp;
  EXPECT_DOUBLE_EQ(megart::model_grad_norm(store, tp, pp, {}), std::sqrt(68.0));
  EXPECT_DOUBLE_EQ(megart::model_grad_norm(store, tp, pp, {0, 1}), 2.0); // h.1.w's 4 ones
}

TEST(PipelineStage, ClosingOpsInTheirOrder) {
  using K = PipeOpKind;
  auto closing = [](std::vector<K> kinds) {
    return [kinds](toy::Program &p) {
      for (int r = 0; r < 2; ++r)
        for (K k : kinds)
          p.ops[r].push_back({k, -1, -1, -1});
    };
  };
  EXPECT_THAT(stage_error(0, closing({K::OptimizerStep})), HasSubstr("has no GradSync where it should"));
  EXPECT_THAT(stage_error(0, closing({K::TiedSumShards, K::GradSync, K::OptimizerStep})),
              HasSubstr("sums tied gradient shards before GradSync, which finishes them"));
  EXPECT_THAT(stage_error(0, closing({K::GradSync, K::OptimizerStep, K::ParamGather, K::GradSync})),
              HasSubstr("has 1 closing ops past where the iteration ends"));
  EXPECT_THAT(stage_error(0, closing({K::GradSync, static_cast<K>(42)})), HasSubstr("has op kind 42 at step"));
}

TEST(PipelineProgram, EveryStageHoldingATiedWeightSumsItAtTheSamePoint) {
  using K = PipeOpKind;
  auto closing = [](std::vector<K> first, std::vector<K> second) {
    return [first, second](toy::Program &p) {
      for (K k : first)
        p.ops[0].push_back({k, -1, -1, -1});
      for (K k : second)
        p.ops[1].push_back({k, -1, -1, -1});
    };
  };
  EXPECT_THAT(program_error(closing({K::GradSync, K::OptimizerStep}, {K::GradSync, K::TiedSum, K::OptimizerStep})),
              HasSubstr("stage 0 holds a weight another stage holds but its table has no TiedSum"));
  EXPECT_THAT(program_error(closing({K::GradSync, K::TiedSum, K::OptimizerStep},
                                    {K::TiedSum, K::GradSync, K::OptimizerStep})),
              HasSubstr("stage 1 sums its tied gradients otherwise than stage 0"));
  EXPECT_THAT(program_error(closing({K::GradSync, K::TiedSumShards, K::OptimizerStep},
                                    {K::GradSync, K::TiedSumShards, K::OptimizerStep})),
              HasSubstr("stage 0 sums tied gradient shards but has no flat_layout to shard them"));
}
