// Where megac finds what it reads at run time (the runtime it builds OUT/train against, its
// tokenizer script, the named clusters): beside the binary in an install prefix, else in the
// source and build trees it was built from.
#pragma once

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace megac {

/// Every path megac reads at run time, resolved once for this binary.
struct MegacPaths {
  /// "installed" (P/bin/megac beside P/share/megac) or "build tree".
  std::string layout;
  std::string tokenizerScript;    // megac_tokenizer.py
  std::string clusterDir;         // NAME.yaml for --cluster NAME
  std::string examplesDir;        // the example specs
  std::string runtimeSourceDir;   // runtime/, which OUT/CMakeLists.txt builds on other machines
  std::string runtimeIncludeDir;  // megart/*.h (installed: megart/cuda/*.h too)
  std::string runtimePchDir;      // megart/cpu_program.h.gch, searched before the headers
  std::string runtimeLibrary;     // libmegart.a
  std::string cudaRuntimeLibrary; // libmegart-cuda.a; empty when megac was built without CUDA
  std::string cudaIncludeDir;     // megart/cuda/*.h; empty without CUDA
  std::string calibrateTool;      // megart-calibrate (built only with MPI)
  /// The build tree's Python env for library tokenizers; empty when installed (MEGAC_PYTHON, else
  /// python3 from PATH: tokenizerPython()).
  std::string pythonEnv;
};

/// The paths of the running megac: P/share/megac, P/include and P/lib when the binary is P/bin/megac
/// and P/share/megac exists; otherwise the source and build trees it was built from.
const MegacPaths &megacPaths();

/// `megac --print-paths`: each resolved path on a line of its own, "NAME: PATH", and the Python
/// that library tokenizers would run in.
void printMegacPaths(llvm::raw_ostream &os);

} // namespace megac
