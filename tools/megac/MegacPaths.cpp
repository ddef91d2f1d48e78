#include "MegacPaths.h"
#include "TextFile.h"
#include "TokenizerProcess.h"

#include "megac/Config.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace llvm;

namespace {

/// P/bin/megac with P/share/megac beside it: what `cmake --install build --prefix P` lays out
/// (the install rules in tools/megac, runtime/ and the top-level CMakeLists.txt).
megac::MegacPaths installed(StringRef prefix, StringRef binDir) {
  megac::MegacPaths p;
  p.layout = "installed";
  const std::string share = megac::joinPath(prefix, "share", "megac");
  p.tokenizerScript = megac::joinPath(share, "megac_tokenizer.py");
  p.clusterDir = megac::joinPath(share, "clusters");
  p.examplesDir = megac::joinPath(share, "examples");
  p.runtimeSourceDir = megac::joinPath(share, "runtime");
  p.runtimeIncludeDir = megac::joinPath(prefix, "include");
  p.runtimePchDir = megac::joinPath(prefix, "lib", "megac", "pch");
  p.runtimeLibrary = megac::joinPath(prefix, "lib", "libmegart.a");
#ifdef MEGAC_CUDA_COMPILER
  p.cudaRuntimeLibrary = megac::joinPath(prefix, "lib", "libmegart-cuda.a");
  p.cudaIncludeDir = p.runtimeIncludeDir;
#endif
  p.calibrateTool = megac::joinPath(binDir, "megart-calibrate");
  return p; // no pythonEnv: the build tree's may be gone (tokenizerPython() says what is used)
}

/// The trees megac was built from, as CMake wrote them into Config.h.
megac::MegacPaths buildTree(StringRef binDir) {
  megac::MegacPaths p;
  p.layout = "build tree";
  p.tokenizerScript = MEGAC_BUILD_TREE_TOKENIZER_SCRIPT;
  p.clusterDir = MEGAC_BUILD_TREE_CLUSTER_DIR;
  p.examplesDir = MEGAC_BUILD_TREE_EXAMPLES_DIR;
  p.runtimeSourceDir = MEGAC_BUILD_TREE_RUNTIME_SOURCE_DIR;
  p.runtimeIncludeDir = MEGAC_BUILD_TREE_RUNTIME_INCLUDE_DIR;
  p.runtimePchDir = MEGAC_BUILD_TREE_RUNTIME_PCH_DIR;
  p.runtimeLibrary = MEGAC_BUILD_TREE_RUNTIME_LIBRARY;
#ifdef MEGAC_CUDA_COMPILER
  p.cudaRuntimeLibrary = MEGAC_BUILD_TREE_CUDA_RUNTIME_LIBRARY;
  p.cudaIncludeDir = MEGAC_BUILD_TREE_CUDA_INCLUDE_DIR;
#endif
  p.calibrateTool = megac::joinPath(binDir, "megart-calibrate"); // the runtime's build puts it in bin/ too
  p.pythonEnv = MEGAC_BUILD_TREE_PYTHON_ENV;
  return p;
}

megac::MegacPaths resolve() {
  // The binary's own path (symbolic links resolved), not argv[0]: megac may be started through PATH.
  static int anchor;
  const std::string self = sys::fs::getMainExecutable(nullptr, &anchor);
  StringRef binDir = sys::path::parent_path(self);
  StringRef prefix = sys::path::parent_path(binDir);
  if (!prefix.empty() && sys::fs::is_directory(megac::joinPath(prefix, "share", "megac")))
    return installed(prefix, binDir);
  return buildTree(binDir);
}

} // namespace

const megac::MegacPaths &megac::megacPaths() {
  static const MegacPaths paths = resolve();
  return paths;
}

void megac::printMegacPaths(raw_ostream &os) {
  const MegacPaths &p = megacPaths();
  auto line = [&](StringRef name, StringRef value) {
    os << name << ": " << (value.empty() ? "(none)" : value) << "\n";
  };
  line("layout", p.layout);
  line("tokenizer-script", p.tokenizerScript);
  line("cluster-dir", p.clusterDir);
  line("examples-dir", p.examplesDir);
  line("runtime-source-dir", p.runtimeSourceDir);
  line("runtime-include-dir", p.runtimeIncludeDir);
  line("runtime-pch-dir", p.runtimePchDir);
  line("runtime-library", p.runtimeLibrary);
  line("cuda-runtime-library", p.cudaRuntimeLibrary);
  line("cuda-include-dir", p.cudaIncludeDir);
  line("calibrate-tool", p.calibrateTool);
  line("python-env", p.pythonEnv);
  line("tokenizer-python", tokenizerPython()); // what library tokenizers run in, as chosen now
}
