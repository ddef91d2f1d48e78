#pragma once

namespace megac {

/// `megac compile SPEC.yaml -o OUT [plan flags]`: spec -> IR -> passes -> C++ -> OUT/train.
int runCompile();

/// `megac data --input FILE... --output-prefix PREFIX`: text -> Megatron indexed dataset.
int runData();

} // namespace megac
