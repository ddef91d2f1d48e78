// megac-test-factor-rules: every op's sharding rule in factors, as a remark, for lit tests.
#include "megac/Transforms/Passes.h"
#include "tx/TxOps.h"

namespace megac {
#define GEN_PASS_DEF_TESTFACTORRULES
#include "megac/Transforms/Passes.h.inc"
} // namespace megac

using namespace mlir;

namespace {

struct TestFactorRulesPass : public megac::impl::TestFactorRulesBase<TestFactorRulesPass> {
  void runOnOperation() override {
    getOperation().walk([](megac::tx::ShardingRuleOpInterface op) {
      std::string text;
      llvm::raw_string_ostream os(text);
      op.getFactorRule().print(os);
      op->emitRemark() << text;
    });
    markAllAnalysesPreserved();
  }
};

} // namespace
