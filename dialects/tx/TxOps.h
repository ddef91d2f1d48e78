#pragma once

#include "megac/Eval/Tensor.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "tx/TxDialect.h"
#include "tx/TxFactorRule.h"
#include "tx/TxAttention.h"
#include "tx/TxGemm.h"
#include "tx/TxKernelCall.h"
#include "tx/TxEnums.h.inc"
#include "tx/TxSharding.h"

#define GET_ATTRDEF_CLASSES
#include "tx/TxAttrs.h.inc"

#include "tx/TxInterfaces.h.inc"

#define GET_OP_CLASSES
#include "tx/TxOps.h.inc"
