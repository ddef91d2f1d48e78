// megac calibrate: measures this machine with megart-calibrate (beside megac, started under
// mpirun as OUT/train is) and writes the cluster file megac simulate reads.
#include "Commands.h"
#include "MegacPaths.h"
#include "RepeatedFlags.h"
#include "TextFile.h"

#include "megac/Sim/Cluster.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <unistd.h>

using namespace llvm;
namespace cl = llvm::cl;

namespace megac::cli {
extern cl::SubCommand calibrate;
} // namespace megac::cli

namespace {
using megac::cli::calibrate;

cl::opt<std::string> target("target", cl::init("cpu"), cl::desc("cpu (the only one so far)"), cl::sub(calibrate),
                            megac::recordValues<std::string>("--target"));
cl::opt<int> ranks("ranks", cl::init(2), cl::desc("MPI ranks to measure with, as OUT/train will run (mpirun -np)"),
                   cl::sub(calibrate), megac::recordValues<int>("--ranks"));
cl::opt<int> threads("threads", cl::init(1), cl::desc("OpenMP threads per rank (OMP_NUM_THREADS), as OUT/train"),
                     cl::sub(calibrate), megac::recordValues<int>("--threads"));
cl::opt<std::string> output("o", cl::Required, cl::desc("the cluster file to write"), cl::value_desc("FILE.yaml"),
                            cl::sub(calibrate), megac::recordValues<std::string>("-o"));

int fail(const Twine &message) {
  errs() << "megac calibrate: error: " << message << "\n";
  return 1;
}

} // namespace

int megac::runCalibrate() {
  if (std::optional<std::string> conflict = megac::conflictingFlagValues())
    return fail(*conflict);
  if (target != "cpu")
    return fail("--target " + target + ": only cpu can be calibrated so far (a GPU's needs cuBLASLt and NCCL "
                                       "timings that are not built yet); use --target cpu");
  if (ranks < 1 || ranks > 64)
    return fail("--ranks is " + Twine(ranks) + "; give 1 to 64 (the ranks OUT/train will run with)");
  if (threads < 1 || threads > 1024)
    return fail("--threads is " + Twine(threads) + "; give 1 to 1024 (OMP_NUM_THREADS per rank)");
  const std::string &tool = megac::megacPaths().calibrateTool;
  if (!sys::fs::can_execute(tool))
    return fail(tool + " is missing: it is built with the runtime when MPI is found (scripts/build.sh)");
  ErrorOr<std::string> mpirun = sys::findProgramByName("mpirun");
  if (!mpirun)
    return fail("mpirun not found: install OpenMPI (scripts/setup.sh)");

  SmallString<128> measured;
  if (std::error_code ec = sys::fs::createTemporaryFile("megac-calibrate", "yaml", measured))
    return fail("cannot create a temporary file: " + ec.message());
  const std::string threadsEnv = "OMP_NUM_THREADS=" + std::to_string(threads);
  SmallVector<StringRef> args = {*mpirun, "--oversubscribe", "-np", "", "-x", "OMP_NUM_THREADS", tool};
  const std::string np = std::to_string(ranks);
  args[3] = np;
  // The environment: ours, the thread count, and Open MPI's consent to run as root.
  SmallVector<std::string> env;
  for (char **e = environ; *e; ++e)
    env.push_back(*e);
  env.push_back(threadsEnv);
  if (getuid() == 0)
    env.append({"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"});
  SmallVector<StringRef> envRefs(env.begin(), env.end());
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(measured), std::nullopt};
  std::string message;
  outs() << "megac calibrate: measuring with " << ranks << " rank(s) x " << threads << " thread(s)...\n";
  const int rc = sys::ExecuteAndWait(*mpirun, args, envRefs, redirects, 0, 0, &message);
  ErrorOr<std::unique_ptr<MemoryBuffer>> text = MemoryBuffer::getFile(measured);
  sys::fs::remove(measured);
  if (rc != 0 || !text)
    return fail("megart-calibrate failed (" + (message.empty() ? "exit " + std::to_string(rc) : message) + ")");
  // What it wrote must be a cluster file megac simulate accepts.
  Expected<sim::Cluster> cluster = sim::parseCluster((*text)->getBuffer(), "megart-calibrate's output");
  if (!cluster)
    return fail(toString(cluster.takeError()));
  if (!writeTextFile(output, [&](raw_ostream &os) { os << (*text)->getBuffer(); }))
    return 1;
  outs() << "megac calibrate: wrote " << output << "\n" << (*text)->getBuffer();
  return 0;
}
