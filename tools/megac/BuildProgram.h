// Building OUT/train from the generated source against the runtime built with megac, and the
// CMakeLists.txt that builds it elsewhere.
#pragma once

#include "megac/Target/EmitCpp.h"

#include "llvm/ADT/StringRef.h"

#include <string>

namespace megac {

/// The program's source file in OUT: main.cpp, or main.cu for CUDA.
llvm::StringRef sourceName(Target target);

/// OUT/CMakeLists.txt: builds the program on another machine (MEGART_DIR set there).
std::string outputCMake(Target target);

/// Compiles DIR/main.cpp (main.cu: nvcc, then the host compiler links) into DIR/train. Returns
/// 0, or 1 having said which command failed and how.
int buildProgram(llvm::StringRef dir, Target target);

} // namespace megac
