// Everything TableGen generates for the `tx` dialect comes from this file.
include "tx/TxAttrs.td"
include "tx/TxOps.td"
include "tx/TxGradOps.td"
include "tx/TxParallelOps.td"
include "tx/TxFusedOps.td"
include "tx/TxMoeOps.td"
