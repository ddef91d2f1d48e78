// megac-fuse-epilogues: matmul + bias add (+ GELU) -> one call, the bias in the GEMM's epilogue.
#include "megac/Transforms/Passes.h"
#include "tx/TxNames.h"
#include "tx/TxOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "megac-fuse-epilogues"

namespace megac {
#define GEN_PASS_DEF_FUSEEPILOGUES
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;

namespace {

/// The bias add a linear layer's GEMM can absorb: the matmul's only user, adding a vector of
/// the output's last dimension to it (as lhs: `tx.add %matmul, %bias`).
tx::AddOp biasAdd(tx::MatmulOp m) {
  if (m.getTransposeLhs() || m.getScale() || cast<RankedTensorType>(m.getRhs().getType()).getRank() != 2 || !m->hasOneUse())
    return nullptr;
  // QLoRA's base GEMM: megac-fuse-nf4-loads makes it read the NF4 weight directly instead.
  if (m.getRhs().getDefiningOp<tx::Nf4DequantizeOp>())
    return nullptr;
  auto add = dyn_cast<tx::AddOp>(*m->getUsers().begin());
  if (!add || add.getLhs() != m.getResult())
    return nullptr;
  auto bias = cast<RankedTensorType>(add.getRhs().getType());
  auto out = cast<RankedTensorType>(m.getType());
  return bias.getRank() == 1 && bias.getDimSize(0) == out.getShape().back() ? add : nullptr;
}

/// A GELU of the biased sum in the same block (the sum's other users read the pre-activation,
/// which the fused op still produces).
tx::GeluOp geluOf(tx::AddOp add) {
  for (Operation *user : add->getUsers())
    if (auto gelu = dyn_cast<tx::GeluOp>(user); gelu && gelu->getBlock() == add->getBlock())
      return gelu;
  return nullptr;
}

struct FuseEpiloguesPass : public megac::impl::FuseEpiloguesBase<FuseEpiloguesPass> {
  void runOnOperation() override {
    SmallVector<tx::MatmulOp> matmuls;
    getOperation().walk([&](tx::MatmulOp m) { matmuls.push_back(m); });
    bool fusedAny = false;
    for (tx::MatmulOp m : matmuls) {
      tx::AddOp add = biasAdd(m);
      if (!add)
        continue;
      fusedAny = true;
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE ": bias add " << add.getLoc() << " into its GEMM"
                              << (geluOf(add) ? ", with the GELU after it\n" : "\n"));
      // At the add: every operand (the matmul's, the bias) is defined before it.
      OpBuilder b(add);
      // The fused results keep the shardings megac-tensor-parallel recorded on the ops they replace.
      Attribute addSharding = add->getAttr(names::kShardingAttr);
      if (tx::GeluOp gelu = geluOf(add)) {
        auto fused =
            tx::MatmulBiasGeluOp::create(b, add.getLoc(), add.getType(), gelu.getType(), m.getLhs(), m.getRhs(),
                                         add.getRhs(), m.getTransposeRhs(), gelu.getApproximation());
        if (Attribute geluSharding = gelu->getAttr(names::kShardingAttr); addSharding && geluSharding)
          fused->setAttr(names::kShardingAttr, b.getArrayAttr({addSharding, geluSharding}));
        gelu.replaceAllUsesWith(fused.getResult());
        gelu.erase();
        add.replaceAllUsesWith(fused.getPre());
      } else {
        auto fused = tx::MatmulBiasOp::create(b, add.getLoc(), add.getType(), m.getLhs(), m.getRhs(), add.getRhs(),
                                              m.getTransposeRhs());
        if (addSharding)
          fused->setAttr(names::kShardingAttr, addSharding);
        add.replaceAllUsesWith(fused.getResult());
      }
      add.erase();
      m.erase();
    }
    if (!fusedAny) // no biases (Llama): nothing changes, so nothing needs verifying again
      markAllAnalysesPreserved();
  }
};

} // namespace
