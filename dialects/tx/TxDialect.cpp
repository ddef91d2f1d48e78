#include "tx/TxDialect.h"
#include "tx/TxOps.h"

using namespace megac::tx;

#include "tx/TxDialect.cpp.inc"
#include "tx/TxEnums.cpp.inc"
#include "tx/TxInterfaces.cpp.inc"

void TxDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "tx/TxOps.cpp.inc"
      >();
  registerAttributes();
}
