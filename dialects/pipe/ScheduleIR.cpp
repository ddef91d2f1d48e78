// Schedule <-> pipe.schedule. The IR lists each rank's actions in the same order as
// Schedule::ranks, so step i of a rank is the i-th op of its pipe.rank body.
#include "pipe/ScheduleIR.h"

#include "llvm/ADT/TypeSwitch.h"

#include <limits>

namespace megac::pipe {

using pipeline::Action;
using pipeline::ActionKind;
using pipeline::Schedule;

ScheduleOp buildScheduleOp(mlir::OpBuilder &builder, mlir::Location loc, const Schedule &s,
                           llvm::StringRef name) {
  auto schedule = ScheduleOp::create(builder, loc, name, pipeline::scheduleKindName(s.kind),
                                     s.stages, s.virtualStages, s.microbatches);
  mlir::OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(&schedule.getBody().emplaceBlock());
  // A large schedule has hundreds of thousands of steps but few distinct numbers: each attribute
  // is made once (uniquing one is a locked hash lookup in the context).
  llvm::DenseMap<int64_t, mlir::IntegerAttr> numbers;
  auto number = [&](int64_t v) {
    mlir::IntegerAttr &attr = numbers[v];
    if (!attr)
      attr = builder.getI64IntegerAttr(v);
    return attr;
  };
  const PayloadAttr activation = PayloadAttr::get(builder.getContext(), Payload::Activation);
  const PayloadAttr grad = PayloadAttr::get(builder.getContext(), Payload::Grad);
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    auto rank = RankOp::create(builder, loc, r);
    mlir::OpBuilder::InsertionGuard rankGuard(builder);
    builder.setInsertionPointToStart(&rank.getBody().emplaceBlock());
    for (const Action &a : s.ranks[r]) {
      switch (a.kind) {
      case ActionKind::Forward:
        ForwardOp::create(builder, loc, number(a.chunk), number(a.microbatch));
        break;
      case ActionKind::Backward:
        BackwardOp::create(builder, loc, number(a.chunk), number(a.microbatch));
        break;
      case ActionKind::SendActivation:
      case ActionKind::SendGrad:
        SendOp::create(builder, loc, a.kind == ActionKind::SendActivation ? activation : grad, number(a.chunk),
                       number(a.microbatch), number(a.peer));
        break;
      case ActionKind::RecvActivation:
      case ActionKind::RecvGrad:
        RecvOp::create(builder, loc, a.kind == ActionKind::RecvActivation ? activation : grad, number(a.chunk),
                       number(a.microbatch), number(a.peer));
        break;
      }
    }
    for (pipeline::ClosingKind k : r < s.closing.size() ? s.closing[r] : std::vector<pipeline::ClosingKind>{}) {
      switch (k) {
      case pipeline::ClosingKind::GradSync:
        GradSyncOp::create(builder, loc);
        break;
      case pipeline::ClosingKind::TiedSum:
      case pipeline::ClosingKind::TiedSumShards:
        TiedSumOp::create(builder, loc, k == pipeline::ClosingKind::TiedSum ? TiedGrads::Whole : TiedGrads::Shards);
        break;
      case pipeline::ClosingKind::OptimizerStep:
        OptimizerStepOp::create(builder, loc);
        break;
      case pipeline::ClosingKind::ParamGather:
        ParamGatherOp::create(builder, loc);
        break;
      }
    }
  }
  return schedule;
}

namespace {

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

// Attribute values are int64; the schedule's are int.
llvm::Expected<int> toInt(mlir::IntegerAttr attr, llvm::StringRef what) {
  int64_t value = attr.getInt();
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max())
    return fail(what + " " + llvm::Twine(value) + " is out of range");
  return static_cast<int>(value);
}

llvm::Expected<Action> actionFromOp(mlir::Operation *op, int rank) {
  auto make = [&](ActionKind kind, mlir::IntegerAttr chunk, mlir::IntegerAttr mb,
                  mlir::IntegerAttr peer) -> llvm::Expected<Action> {
    llvm::Expected<int> c = toInt(chunk, "chunk"), m = toInt(mb, "microbatch");
    llvm::Expected<int> p = peer ? toInt(peer, "peer") : llvm::Expected<int>(-1);
    if (!c || !m || !p)
      return llvm::joinErrors(llvm::joinErrors(c.takeError(), m.takeError()), p.takeError());
    return Action{kind, *c, *m, *p};
  };
  return llvm::TypeSwitch<mlir::Operation *, llvm::Expected<Action>>(op)
      .Case([&](ForwardOp f) {
        return make(ActionKind::Forward, f.getChunkAttr(), f.getMicrobatchAttr(), nullptr);
      })
      .Case([&](BackwardOp b) {
        return make(ActionKind::Backward, b.getChunkAttr(), b.getMicrobatchAttr(), nullptr);
      })
      .Case([&](SendOp s) {
        return make(s.getPayload() == Payload::Activation ? ActionKind::SendActivation
                                                          : ActionKind::SendGrad,
                    s.getChunkAttr(), s.getMicrobatchAttr(), s.getPeerAttr());
      })
      .Case([&](RecvOp r) {
        return make(r.getPayload() == Payload::Activation ? ActionKind::RecvActivation
                                                          : ActionKind::RecvGrad,
                    r.getChunkAttr(), r.getMicrobatchAttr(), r.getPeerAttr());
      })
      .Default([&](mlir::Operation *other) -> llvm::Expected<Action> {
        return fail("pipe.rank " + llvm::Twine(rank) + " holds '" +
                    other->getName().getStringRef() +
                    "', which is not a schedule action (pipe.forward, pipe.backward, pipe.send, "
                    "pipe.recv, or a closing one)");
      });
}

/// The closing action `op` is, if it is one.
std::optional<pipeline::ClosingKind> closingKindOf(mlir::Operation *op) {
  using pipeline::ClosingKind;
  return llvm::TypeSwitch<mlir::Operation *, std::optional<ClosingKind>>(op)
      .Case([](GradSyncOp) { return ClosingKind::GradSync; })
      .Case([](TiedSumOp t) {
        return t.getGrads() == TiedGrads::Whole ? ClosingKind::TiedSum : ClosingKind::TiedSumShards;
      })
      .Case([](OptimizerStepOp) { return ClosingKind::OptimizerStep; })
      .Case([](ParamGatherOp) { return ClosingKind::ParamGather; })
      .Default([](mlir::Operation *) { return std::nullopt; });
}

} // namespace

llvm::Expected<Schedule> scheduleFromOp(ScheduleOp op) {
  std::optional<pipeline::ScheduleKind> kind = pipeline::parseScheduleKind(op.getKind());
  if (!kind)
    return fail("kind \"" + op.getKind() + "\" is not a schedule kind: use gpipe, 1f1b or interleaved");
  llvm::Expected<int> P = toInt(op.getStagesAttr(), "stages");
  llvm::Expected<int> V = toInt(op.getVirtualStagesAttr(), "virtual_stages");
  llvm::Expected<int> m = toInt(op.getMicrobatchesAttr(), "microbatches");
  if (!P || !V || !m)
    return llvm::joinErrors(llvm::joinErrors(P.takeError(), V.takeError()), m.takeError());

  llvm::SmallVector<RankOp> rankOps;
  if (!op.getBody().empty())
    for (mlir::Operation &child : op.getBody().front()) {
      auto rank = llvm::dyn_cast<RankOp>(child);
      if (!rank)
        return fail("holds '" + child.getName().getStringRef() + "'; a schedule holds only pipe.rank ops");
      rankOps.push_back(rank);
    }
  if (static_cast<int64_t>(rankOps.size()) != *P)
    return fail("has " + llvm::Twine(rankOps.size()) + " pipe.rank ops, but stages is " +
                llvm::Twine(*P) + ": give one per pipeline rank");

  Schedule s{*kind, *P, *V, *m, {}};
  s.ranks.resize(rankOps.size());
  s.closing.resize(rankOps.size());
  std::vector<bool> seen(rankOps.size(), false);
  for (RankOp rankOp : rankOps) {
    int64_t r = rankOp.getRankAttr().getInt();
    if (r < 0 || r >= *P)
      return fail("pipe.rank " + llvm::Twine(r) + " does not exist: stages is " + llvm::Twine(*P) +
                  " (ranks 0.." + llvm::Twine(*P - 1) + ")");
    if (seen[r])
      return fail("pipe.rank " + llvm::Twine(r) + " appears twice");
    seen[r] = true;
    if (rankOp.getBody().empty())
      continue;
    for (mlir::Operation &child : rankOp.getBody().front()) {
      if (std::optional<pipeline::ClosingKind> closing = closingKindOf(&child)) {
        s.closing[r].push_back(*closing);
        continue;
      }
      llvm::Expected<Action> action = actionFromOp(&child, r);
      if (!action)
        return action.takeError();
      s.ranks[r].push_back(*action);
    }
  }
  return s;
}

mlir::Operation *findScheduleStep(ScheduleOp op, int rank, int step) {
  if (op.getBody().empty())
    return nullptr;
  for (auto rankOp : op.getBody().front().getOps<RankOp>()) {
    if (rankOp.getRankAttr().getInt() != rank)
      continue;
    if (step < 0)
      return rankOp;
    if (rankOp.getBody().empty())
      return nullptr;
    for (mlir::Operation &child : rankOp.getBody().front())
      if (step-- == 0)
        return &child;
    return nullptr;
  }
  return nullptr;
}

} // namespace megac::pipe
