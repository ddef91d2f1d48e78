#include "pipe/PipeDialect.h"
#include "pipe/PipeOps.h"

using namespace megac::pipe;

#include "pipe/PipeDialect.cpp.inc"
#include "pipe/PipeEnums.cpp.inc"

void PipeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "pipe/PipeOps.cpp.inc"
      >();
}
