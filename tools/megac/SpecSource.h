// What `megac compile`, `simulate` and `plan` take as SPEC: a spec YAML, or a Hugging Face model
// (its folder, or its config.json) read into one. Megatron's flags --seq-length (default: the
// spec's seq_length; a config.json's max_position_embeddings), --hidden-dropout and
// --attention-dropout set those keys of the spec, which the program records as it was compiled.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace megac {

struct SpecSource {
  std::string text;   // the spec YAML (made from config.json for a Hugging Face model)
  std::string origin; // what messages name: the YAML file, or the config.json
  std::string huggingFaceConfig; // the config.json it was made from, if any
};

/// The spec keys a command line sets over the spec's own.
struct SpecOverrides {
  std::optional<int64_t> seqLength;
  std::optional<double> hiddenDropout, attentionDropout;
};

/// The spec `path` names, with `overrides`. A Hugging Face model is checked field by field
/// against what megac computes (the check OUT/train --load makes).
llvm::Expected<SpecSource> readSpecSource(llvm::StringRef path, const SpecOverrides &overrides);

/// --seq-length, --hidden-dropout and --attention-dropout, where given (defined with the compile
/// flags in CompileCommand.cpp; compile, simulate and plan take them).
SpecOverrides specOverrideFlags();

/// `specText` with seq_length `seqLength`, and max_position_embeddings `maxPositions` unless
/// the spec sets it (a learned position table keeps the model's rows). Fails when the spec is not
/// written one key a line (megac's flat YAML), naming `origin`.
llvm::Expected<std::string> specWithSeqLength(llvm::StringRef specText, int64_t seqLength, int64_t maxPositions,
                                              llvm::StringRef origin);

} // namespace megac
