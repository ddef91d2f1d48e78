// megac-fuse-nf4-loads: QLoRA's GEMMs read their NF4 weight directly (tx.matmul_nf4), which the
// kernel dequantizes a tile at a time, instead of a dequantized copy of the whole matrix.
#include "megac/Transforms/Passes.h"
#include "tx/TxOps.h"

#include "mlir/IR/Builders.h"

namespace megac {
#define GEN_PASS_DEF_FUSENF4LOADS
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;
using namespace megac;

namespace {

struct FuseNf4LoadsPass : public megac::impl::FuseNf4LoadsBase<FuseNf4LoadsPass> {
  void runOnOperation() override {
    SmallVector<tx::Nf4DequantizeOp> dequantized;
    getOperation().walk([&](tx::Nf4DequantizeOp d) { dequantized.push_back(d); });
    if (dequantized.empty()) // not a QLoRA program: nothing changes, so nothing needs verifying again
      return markAllAnalysesPreserved();
    for (tx::Nf4DequantizeOp d : dequantized) {
      for (OpOperand &use : llvm::make_early_inc_range(d->getUses())) {
        auto m = dyn_cast<tx::MatmulOp>(use.getOwner());
        // The base product reads the weight as its (possibly transposed) rhs, unscaled.
        if (!m || use.get() != m.getRhs() || m.getLhs() == m.getRhs() || m.getTransposeLhs() || m.getScale())
          continue;
        OpBuilder b(m);
        auto fused = tx::MatmulNf4Op::create(b, m.getLoc(), m.getType(), m.getLhs(), d.getWeight(), m.getTransposeRhs());
        fused->setDiscardableAttrs(m->getDiscardableAttrDictionary()); // the sharding megac-tensor-parallel recorded
        m.replaceAllUsesWith(fused.getResult());
        m.erase();
      }
      if (d->use_empty())
        d.erase();
    }
  }
};

} // namespace
