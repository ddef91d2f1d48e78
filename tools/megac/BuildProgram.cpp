#include "BuildProgram.h"
#include "MegacPaths.h"
#include "RunCommand.h"

#include "megac/Config.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;
using namespace megac;

namespace {

int fail(const Twine &message) {
  errs() << "megac compile: error: " << message << "\n";
  return 1;
}

/// Runs one build command; on failure says which and how it ended.
int run(ArrayRef<std::string> args, const Twine &what) {
  if (Error e = runCommand(args, what))
    return fail(toString(std::move(e)));
  return 0;
}

void appendSplit(SmallVectorImpl<std::string> &args, StringRef list, StringRef prefix = "") {
  SmallVector<StringRef> items;
  list.split(items, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef item : items)
    args.push_back((prefix + item).str());
}

} // namespace

StringRef megac::sourceName(Target target) { return target == Target::Cuda ? "main.cu" : "main.cpp"; }

std::string megac::outputCMake(Target target) {
  bool cuda = target == Target::Cuda;
  std::string text = "# Builds the generated training program against megac's runtime.\n"
                     "# megac compile already built ./train; this is for other machines (set MEGART_DIR).\n"
                     "cmake_minimum_required(VERSION 3.20)\n";
  // Before project(), which fixes nvcc and its default architecture when it enables CUDA.
  if (cuda)
    text += "if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)\n"
            "  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)\nendif()\n"
            "if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)\n  set(CMAKE_CUDA_ARCHITECTURES 80-real 90)\nendif()\n";
  text += std::string("project(megac_train LANGUAGES C CXX") + (cuda ? " CUDA" : "") + ")\n";
  text += std::string("set(CMAKE_CXX_STANDARD 17)\n") +
          (cuda ? "set(CMAKE_CUDA_STANDARD 17)\n"
                : "set(MEGART_CUDA OFF CACHE BOOL \"a CPU program needs no CUDA backend\" FORCE)\n") +
          "set(MEGART_DIR \"" + megacPaths().runtimeSourceDir + "\" CACHE PATH \"megac's runtime/ folder\")\n" +
          "add_subdirectory(${MEGART_DIR} megart EXCLUDE_FROM_ALL)\n";
  text += cuda ? "add_executable(train main.cu)\ntarget_link_libraries(train PRIVATE megart-cuda)\n"
               : "add_executable(train main.cpp)\ntarget_link_libraries(train PRIVATE megart)\n";
  // The generated tables initialise their fields by name (C++20 designated initializers).
  text +=
      std::string("set_target_properties(train PROPERTIES CXX_STANDARD 20") + (cuda ? " CUDA_STANDARD 20" : "") + ")\n";
  return text;
}

int megac::buildProgram(StringRef out, Target target) {
  SmallString<128> source(out), object(out), binary(out);
  sys::path::append(source, sourceName(target));
  sys::path::append(object, "main.o");
  sys::path::append(binary, "train");
  const MegacPaths &paths = megacPaths();
  SmallVector<std::string> link = {MEGAC_CXX_COMPILER, "-fopenmp", "-o", std::string(binary)};
  if (target == Target::Cuda) {
#ifdef MEGAC_CUDA_COMPILER
    // sm_80 (A100) and sm_90 (H100/H200) machine code, and sm_90 PTX for newer GPUs.
    SmallVector<std::string> compile = {MEGAC_CUDA_COMPILER,
                                        "-std=c++20",
                                        "-O2",
                                        "-x",
                                        "cu",
                                        "-c",
                                        "-gencode=arch=compute_80,code=sm_80",
                                        "-gencode=arch=compute_90,code=sm_90",
                                        "-gencode=arch=compute_90,code=compute_90",
                                        "-Xcompiler=-fopenmp",
                                        "-I" + paths.cudaIncludeDir,
                                        "-I" + paths.runtimeIncludeDir};
    appendSplit(compile, MEGAC_CUDA_INCLUDE_DIRS, "-I");
    compile.append({std::string(source), "-o", std::string(object)});
    if (int rc = run(compile, "compiling " + source.str() + " with nvcc"))
      return rc;
    link.append({std::string(object), paths.cudaRuntimeLibrary, paths.runtimeLibrary});
    appendSplit(link, MEGAC_RUNTIME_LINK);
    appendSplit(link, MEGAC_CUDA_LINK);
#endif
  } else {
    link.append({"-std=c++20", "-O2"});    // the tables' designated initializers
    appendSplit(link, MEGAC_RUNTIME_ARCH); // the runtime's target: -march=native unless MEGART_PORTABLE
    appendSplit(link, MEGAC_RUNTIME_PROGRAM_FLAGS); // e.g. the sanitizers the runtime was built with
    appendSplit(link, MEGAC_PROGRAM_LINKER);        // gold where the toolchain has it (faster)
    // The precompiled megart/cpu_program.h first (the runtime's build made it with these flags).
    link.append(
        {"-I" + paths.runtimePchDir, "-I" + paths.runtimeIncludeDir, std::string(source), paths.runtimeLibrary});
    appendSplit(link, MEGAC_RUNTIME_LINK);
  }
  return run(link, "building " + binary.str());
}

