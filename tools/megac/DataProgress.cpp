#include "DataProgress.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace megac;

DataProgress::DataProgress(uint64_t totalBytes) : total_(totalBytes) {}

void DataProgress::update(int64_t documents, uint64_t bytesRead) {
  if (!pace_.due())
    return;
  const double elapsed = pace_.elapsed(), rate = bytesRead / elapsed;
  llvm::errs() << "megac data: " << documents << " documents, " << llvm::format("%.1f", bytesRead / 1e6);
  if (total_ > 0)
    llvm::errs() << " of " << llvm::format("%.1f", total_ / 1e6) << " MB ("
                 << llvm::format("%.0f", 100.0 * bytesRead / total_) << "%)";
  else
    llvm::errs() << " MB";
  llvm::errs() << ", " << llvm::format("%.0f", documents / elapsed) << " documents/s, "
               << llvm::format("%.1f", rate / 1e6) << " MB/s";
  if (total_ > bytesRead && rate > 0)
    llvm::errs() << ", ETA " << llvm::format("%.0f", (total_ - bytesRead) / rate) << " s";
  llvm::errs() << "\n";
}

void DataProgress::finish(int64_t documents, uint64_t bytesRead) const {
  const double elapsed = pace_.elapsed();
  llvm::errs() << "megac data: read " << bytesRead << " bytes";
  if (total_ > 0)
    llvm::errs() << " (" << llvm::format("%.0f", 100.0 * bytesRead / total_) << "% of the input)";
  llvm::errs() << ", " << documents << " documents in " << llvm::format("%.1f", elapsed) << " s ("
               << llvm::format("%.1f", elapsed > 0 ? bytesRead / elapsed / 1e6 : 0.0) << " MB/s)\n";
}
