// megac-test-kernel-calls: every op's runtime kernel call, as a remark, for lit tests.
#include "megac/Transforms/Passes.h"
#include "tx/TxOps.h"

#include "mlir/IR/AsmState.h"

namespace megac {
#define GEN_PASS_DEF_TESTKERNELCALLS
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;

namespace {

struct TestKernelCallsPass : public megac::impl::TestKernelCallsBase<TestKernelCallsPass> {
  using TestKernelCallsBase::TestKernelCallsBase;

  void runOnOperation() override {
    // Each value as the IR prints it (%arg0, %3), so a check line reads like the input.
    AsmState names(getOperation());
    getOperation().walk([&](megac::tx::KernelCallOpInterface op) {
      FailureOr<megac::tx::KernelCall> call = op.getKernelCall(decode);
      if (failed(call))
        return;
      std::string text;
      llvm::raw_string_ostream os(text);
      megac::tx::printKernelCall(os, *call, [&](Value v) {
        std::string name;
        llvm::raw_string_ostream vs(name);
        v.printAsOperand(vs, names);
        return name;
      });
      op->emitRemark() << text;
    });
    markAllAnalysesPreserved();
  }
};

} // namespace
