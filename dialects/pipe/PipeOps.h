#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "pipe/PipeDialect.h"
#include "pipe/PipeEnums.h.inc"

#define GET_OP_CLASSES
#include "pipe/PipeOps.h.inc"
