// A pipelined training run in which pp rank 1 hangs in its second iteration: pp rank 0 must time
// out waiting for its gradient, say where (iteration, schedule step, peer) and end the whole MPI
// job instead of waiting forever. With --die, pp rank 1 is killed (SIGKILL) there instead:
// mpirun then stops rank 0 by SIGTERM, and rank 0 must say which peer it was waiting for.
// A program of its own (ctest runtime-mpi-timeout and runtime-mpi-killed-rank check its
// output): the abort ends every rank, which the gtest binary must not do.
#include "megart/launch_env.h"

#include "toy_pipeline.h"

#include <chrono>
#include <csignal>
#include <thread>

namespace {

int forwards = 0;
bool die = false;

// The last chunk's forward, which stops for a minute (or dies) on iteration 2 (its 5th call).
float hanging_forward(const megart::StepContext &ctx, float *const *params, char *arena,
                      const int32_t *ids, const int32_t *labels, const float *input, float *output,
                      char *stash) {
  if (++forwards == toy::kMicrobatches + 1 && die)
    std::raise(SIGKILL);
  if (forwards == toy::kMicrobatches + 1)
    std::this_thread::sleep_for(std::chrono::seconds(60));
  return toy::Chunks<2, 2>::forward<1>(ctx, params, arena, ids, labels, input, output, stash);
}

} // namespace

int main(int argc, char **argv) {
  die = argc == 3 && std::string(argv[2]) == "--die";
  if (argc != 2 && !die) {
    std::fprintf(stderr, "usage: %s FOLDER [--die] (mpirun -np 2)\n", argv[0]);
    return 1;
  }
  const int rank = megart::detect_launch_env().rank;
  // Each rank its own copy of the data: nothing is shared before MPI starts.
  const std::string data = std::string(argv[1]) + "/hang-data-" + std::to_string(rank);
  train_test::write_dataset(data, train_test::bigram_documents(20, 50));
  toy::Program p;
  toy::build<2, 2>(p, toy::one_f_one_b(), {2, 1});
  p.chunks[1][0].forward = &hanging_forward;
  // Killed, the peer never answers: the timeout (10 min by default) must not come first.
  const std::vector<std::string> args = {argv[0], "--data-path", data, "--train-iters", "3",
                                         "--lr", "0.01", "--distributed-timeout-minutes",
                                         die ? "10" : "0.02"};
  std::vector<char *> args_c;
  for (const std::string &a : args)
    args_c.push_back(const_cast<char *>(a.c_str()));
  return megart::train_main(static_cast<int>(args_c.size()), args_c.data(), p.desc);
}
