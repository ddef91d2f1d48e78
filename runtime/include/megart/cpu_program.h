// Everything a generated CPU training program (megac compile's main.cpp) includes, in one
// header so that the runtime's build can precompile it (build/runtime/pch): megac then compiles
// a program in about a third of the time. See runtime/CMakeLists.txt (megart-program-pch).
#pragma once

#include "megart/kernels.h"
#include "megart/layout_kernels.h"
#include "megart/parallel_kernels.h"
#include "megart/program.h"

#include <cstring>
