#pragma once

#include "mlir/IR/Dialect.h"

#include "tx/TxDialect.h.inc"
