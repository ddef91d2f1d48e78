#include "GenerateWindow.h"

#include "megac/Frontend/ModelSpec.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>

using namespace llvm;

namespace megac {

int64_t generateWindow(int64_t modelPositions, int64_t tokens) {
  if (modelPositions <= kGenerateWindow)
    return modelPositions;
  int64_t window = kGenerateWindow;
  while (window < tokens) // tokens <= modelPositions <= limits::kSeqLength: no overflow
    window *= 2;
  return std::min(window, modelPositions);
}

Expected<std::string> specWithSeqLength(StringRef specText, int64_t seqLength, int64_t maxPositions,
                                        StringRef origin) {
  SmallVector<StringRef> lines;
  specText.split(lines, '\n');
  std::string out;
  bool hasMaxPositions = false;
  for (StringRef line : lines) {
    if (line.starts_with("max_position_embeddings:"))
      hasMaxPositions = true;
    out += line.starts_with("seq_length:") ? ("seq_length: " + Twine(seqLength)).str() : line.str();
    out += "\n";
  }
  if (!hasMaxPositions)
    out += ("max_position_embeddings: " + Twine(maxPositions) + "\n").str();
  // Read back: the edit must have given exactly these sizes (a spec in YAML's flow style would not).
  Expected<ModelSpec> edited = parseModelSpec(out, origin);
  if (edited && edited->seqLength == seqLength && edited->maxPositionEmbeddings == maxPositions)
    return out;
  if (!edited)
    consumeError(edited.takeError());
  return createStringError(inconvertibleErrorCode(),
                           origin + ": megac generate compiles this model for " + Twine(seqLength) + " of its " +
                               Twine(maxPositions) + " positions, but cannot set the spec's seq_length (it is not "
                               "one 'seq_length: N' line); write the spec one key a line");
}

} // namespace megac
