// Pipeline schedules as data: which rank runs which forward / backward of which chunk and
// microbatch, in what order, with the point-to-point messages between ranks. Built for GPipe,
// 1F1B and interleaved 1F1B, checked (matching messages, no deadlock, bounded stash) and
// simulated (bubble) before anything runs. No MLIR here: the `pipe` dialect
// (dialects/pipe/ScheduleIR.h) converts to and from IR.
//
// Model: P ranks, V chunks per rank, m microbatches; C = P * V chunks; chunk c runs on rank
// c % P. Forward (c, mb) needs forward (c - 1, mb)'s output; backward (c, mb) needs forward
// (c, mb) on the same rank and backward (c + 1, mb)'s input gradient.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megac::pipeline {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved };

/// "gpipe" | "1f1b" | "interleaved"; std::nullopt for anything else.
std::optional<ScheduleKind> parseScheduleKind(llvm::StringRef name);
llvm::StringRef scheduleKindName(ScheduleKind kind);

enum class ActionKind { Forward, Backward, SendActivation, RecvActivation, SendGrad, RecvGrad };

/// "Forward", "RecvGrad", ... (the names the verifier's messages use).
llvm::StringRef actionKindName(ActionKind kind);

/// One step of a rank's list. `chunk` is always the chunk on the rank doing the action:
/// SendActivation(c, mb) sends c's output to the rank of c + 1; RecvActivation(c, mb) receives
/// c's input from the rank of c - 1; SendGrad(c, mb) sends c's input gradient to the rank of
/// c - 1; RecvGrad(c, mb) receives c's output gradient from the rank of c + 1.
struct Action {
  ActionKind kind;
  int chunk;
  int microbatch;
  int peer; // the other pipeline rank for send / recv, -1 for compute
};

/// What closes a rank's iteration, once, after its last action (pipe.grad_sync ...): the
/// data-parallel gradient sync, the sum of the gradients of weights tied to other ranks (the word
/// embedding and the LM head) on whole gradients or on the reduce-scattered shards, the optimizer
/// step, and the all-gather of the updated parameters over the shard group.
enum class ClosingKind { GradSync, TiedSum, TiedSumShards, OptimizerStep, ParamGather };

/// "GradSync", "TiedSumShards", ... (the generated tables' names, megart::PipeOpKind).
llvm::StringRef closingKindName(ClosingKind kind);

struct Schedule {
  ScheduleKind kind;
  int stages;        // P
  int virtualStages; // V
  int microbatches;  // m
  std::vector<std::vector<Action>> ranks; // ranks[r] = rank r's actions, in order
  // closing[r] = what closes rank r's iteration, in order (empty until the plan's are known:
  // buildSchedule leaves them to megac-pipeline-schedule; the builder, verifier and simulator
  // read `ranks` only). They run once per iteration, after all of its rounds.
  std::vector<std::vector<ClosingKind>> closing;
};

/// Builds the per-rank lists with their messages: a RecvActivation right before the Forward that
/// needs it, a SendActivation right after the Forward that produces it, RecvGrad right before the
/// Backward, SendGrad right after. (1F1B with V > 1 runs its chunks in different patterns on
/// different ranks; there a send may wait, after its Forward / Backward, until the messages its
/// receiver takes first on that channel are sent, since messages are matched in order.)
/// Fails (with a message naming the flag, the value and the fix) for P, V or m < 1, interleaved
/// with V == 1 or m % P != 0, and V > 1 with P == 1.
///
/// Orders: GPipe: all forwards (local chunks in order, microbatches in order), then all
/// backwards (local chunks last to first). 1F1B, V == 1: Megatron's (min(P - r - 1, m) warmup
/// forwards, one forward / one backward, the remaining backwards). Interleaved: Megatron's, with
/// microbatch groups of P. 1F1B, V > 1: 1F1B over the C chunks as C stages, timed with tf = 1,
/// tb = 2, each rank running its chunks' ops in order of start time (backwards first on ties).
/// Refuses schedules of more than kMaxScheduleSlots (chunk, microbatch) pairs over all ranks.
llvm::Expected<Schedule> buildSchedule(ScheduleKind kind, int P, int V, int m);

/// buildSchedule's refusals alone, without building the lists: whether a schedule of `kind`
/// exists for P, V and m (megac compile's plan checks; megac plan checks every candidate).
llvm::Error checkScheduleExists(ScheduleKind kind, int P, int V, int m);

/// The most (chunk, microbatch) pairs, P x V x m, a schedule may have: every pair is a forward
/// and a backward in the IR and in the generated tables (2^18 take about 3 s to compile).
constexpr int64_t kMaxScheduleSlots = int64_t(1) << 18;

/// The bound the schedule's kind promises on stashed (forward done, backward not yet)
/// (chunk, microbatch) pairs on `rank`.
int64_t stashBound(const Schedule &s, int rank);

/// Per rank, the peak number of stashed (chunk, microbatch) pairs when it runs its list in order.
std::vector<int64_t> peakStash(const Schedule &s);

/// Checks, in this order: every chunk / microbatch / peer in range and every (chunk, mb) of a
/// rank forwarded and backwarded exactly once; each compute after what it needs on its rank and
/// each send after what it sends; sends and receives between every two ranks matched in order;
/// no deadlock (sends buffered, receives blocking); stash peak within stashBound. The message
/// names the rank(s), the step (index in the rank's list) and the action. The error is a
/// ScheduleError, which also carries those (rank, step) pairs.
llvm::Error verifySchedule(const Schedule &s);

/// The error verifySchedule returns: the message plus the (rank, step) pairs it is about, so
/// that the IR verifier can point at the ops.
class ScheduleError : public llvm::ErrorInfo<ScheduleError> {
public:
  static char ID;
  struct Site {
    int rank;
    int step;
  };
  ScheduleError(std::string message, std::vector<Site> sites)
      : message(std::move(message)), sites(std::move(sites)) {}
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override { return llvm::inconvertibleErrorCode(); }
  const std::string &getMessage() const { return message; }
  const std::vector<Site> &getSites() const { return sites; }

private:
  std::string message;
  std::vector<Site> sites;
};

/// One executed action. Compute ops last tf / tb; a send takes no time on its rank (start ==
/// end); a receive starts when its rank reaches it and ends when the message has arrived, so
/// end - start is the time the rank waited.
struct SimEvent {
  int rank;
  ActionKind kind;
  int chunk;
  int microbatch;
  double start, end;
};

struct Simulation {
  double makespan;       // infinity if the schedule deadlocks
  double busyPerRank;    // V * m * (tf + tb): the busiest rank's compute time
  double bubbleFraction; // (makespan - busy) / busy
  std::vector<SimEvent> events; // every action, rank by rank, in list order
};

/// How long each action takes: a forward or backward (compute), and a message from its send to
/// its arrival (message, given the send).
struct ActionCosts {
  std::function<double(const Action &)> compute;
  std::function<double(const Action &)> message;
};

/// Runs every rank's list in order: an op starts when its rank is free and its inputs have
/// arrived; a message arrives costs.message after its send. Meant for schedules that pass
/// verifySchedule. busyPerRank is the busiest rank's compute time.
Simulation simulate(const Schedule &s, const ActionCosts &costs);
/// The same with every forward tf, every backward tb and every message tcomm.
Simulation simulate(const Schedule &s, double tf, double tb, double tcomm = 0);

/// One line per rank, compute only: "rank 0: F0.0 F0.1 B0.0 ...".
std::string formatScheduleText(const Schedule &s);

/// One line per rank with the messages too: "sA0.1>1" (SendActivation chunk 0 mb 1 to rank 1),
/// "rA1.0<0" (RecvActivation from rank 0), "sG", "rG" likewise for gradients.
std::string formatScheduleTextWithComms(const Schedule &s);

/// Chrome trace / Perfetto JSON: one "X" event per compute op (pid 0, tid = rank, name "F0.1"),
/// times scaled so that a forward lasts 1000 us, and "pp rank N" thread names.
std::string chromeTraceJson(const Schedule &s, const Simulation &sim);

} // namespace megac::pipeline
