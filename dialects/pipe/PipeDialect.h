#pragma once

#include "mlir/IR/Dialect.h"

#include "pipe/PipeDialect.h.inc"
