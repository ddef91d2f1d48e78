// megac-opt: mlir-opt with megac's dialects and passes, plus the upstream dialects megac's IR
// mixes in. Used by the lit tests and for running one pass by hand.
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "megac/Pipeline/Passes.h"
#include "megac/Plan/PlanDialect.h"
#include "megac/Transforms/Passes.h"
#include "megac/Transforms/TrainingPipeline.h"
#include "pipe/PipeDialect.h"
#include "tx/TxDialect.h"

int main(int argc, char **argv) {
  megac::registerMegacPasses();
  megac::pipeline::registerMegacPipelinePasses();
  megac::registerTrainingPipeline();
  mlir::registerCSEPass();
  mlir::DialectRegistry registry;
  registry.insert<megac::tx::TxDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::tensor::TensorDialect, mlir::shard::ShardDialect, megac::pipe::PipeDialect,
                  megac::MegacDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "megac optimizer driver\n", registry));
}
