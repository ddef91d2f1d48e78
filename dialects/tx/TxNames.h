// The names megac's passes, emitters and driver agree on: discardable attributes, the symbols
// they look up and the function-name scheme. Each is spelled here and nowhere else.
#pragma once

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace megac::names {

// ---- attributes -------------------------------------------------------------------------------

/// On the module: the model's dimensions (family, layers, hidden, seq, vocab, micro batch, FLOPs).
inline constexpr llvm::StringLiteral kModelAttr = "megac.model";
/// On @grid: the names of the grid's axes, in Megatron's rank order (slowest first).
inline constexpr llvm::StringLiteral kAxesAttr = "megac.axes";
/// On @grid: the rest of the parallel plan (sequence parallelism, pipeline schedule, buckets).
inline constexpr llvm::StringLiteral kPlanAttr = "megac.plan";
/// On a collective: the Megatron rule that put it there.
inline constexpr llvm::StringLiteral kRuleAttr = "megac.rule";
/// On an op (one per result) and on function arguments / results: how each value is spread
/// over the grid after megac-tensor-parallel.
inline constexpr llvm::StringLiteral kShardingAttr = "megac.sharding";
/// On a tx.param (megac-shard-propagate): how the parameter is kept between uses when that is
/// not how ops read it (ZeRO-3: also split over dp, gathered before use).
inline constexpr llvm::StringLiteral kKeptShardingAttr = "megac.kept";
/// On the call of a layer's forward half: the layer function it was split from.
inline constexpr llvm::StringLiteral kLayerAttr = "megac.layer";
/// On a layer's forward half: the index of its first result that is an activation saved for the
/// backward half (the ones before are the layer's results). On the backward half: the forward
/// arguments it takes first, by index (then the saved activations, then the results' cotangents).
inline constexpr llvm::StringLiteral kSavedFromAttr = "megac.saved_from";
inline constexpr llvm::StringLiteral kForwardArgsAttr = "megac.forward_args";
/// On a call that reruns a layer's forward in backward (activation recomputation): the layer's
/// index in the model.
inline constexpr llvm::StringLiteral kRecomputeAttr = "megac.recompute";
/// --distribute-saved-activations: on the rerun of a group's first layer, whose input the forward
/// keeps split over tp; on the op that splits it (in the forward), the index of that layer.
inline constexpr llvm::StringLiteral kDistributeSavedAttr = "megac.distribute_saved";
inline constexpr llvm::StringLiteral kSavedForAttr = "megac.saved_for";
/// Selective recomputation: on an op of a layer's backward half, a forward op rerun there; on
/// the backward half, the names of the saved activations it recomputes.
inline constexpr llvm::StringLiteral kRecomputedAttr = "megac.recomputed";
/// On every call of a layer's function (its forward, backward and recomputed halves): the
/// layer's index in the model, which draws that layer's dropout masks.
inline constexpr llvm::StringLiteral kLayerIndexAttr = "megac.layer_index";
/// On an argument of a layer's function that every call passes a frozen tx.param (LoRA's base
/// weights): megac-autodiff computes no gradient for it.
inline constexpr llvm::StringLiteral kFrozenArgAttr = "megac.frozen";
/// In the LoRA pass's dropout streams: a layer's adapted module m draws stream
/// kLoraDropoutStream + m (after the hidden and attention dropout streams).
inline constexpr int64_t kLoraDropoutStream = 16;
/// On a function: what it is in the training program (#megac.role, megac/Plan/PlanDialect.h).
inline constexpr llvm::StringLiteral kRoleAttr = "megac.role";
/// On a pipeline chunk function: its chunk and the number of values its forward stashes.
inline constexpr llvm::StringLiteral kChunkAttr = "megac.chunk";
inline constexpr llvm::StringLiteral kStashAttr = "megac.stash";
/// megac-plan-workspace's plan. On an op: each result's offset in its function's workspace (-1:
/// a view or the caller's buffer) and the position of the last op that reads it. On a function:
/// the bytes of its own buffers (where its callees' workspace starts) and with its callees'.
inline constexpr llvm::StringLiteral kWorkspaceOffsetsAttr = "megac.workspace_offsets";
inline constexpr llvm::StringLiteral kLiveUntilAttr = "megac.live_until";
inline constexpr llvm::StringLiteral kFrameBytesAttr = "megac.frame_bytes";
inline constexpr llvm::StringLiteral kWorkspaceBytesAttr = "megac.workspace_bytes";

// ---- dropout sites: the stream of each mask a layer draws (megart/dropout.h) -------------------

inline constexpr int64_t kEmbeddingDropoutStream = 0;       // after the embeddings (outside layers)
inline constexpr int64_t kAttentionDropoutStream = 1;       // the attention probabilities
inline constexpr int64_t kAttentionOutputDropoutStream = 2; // the attention's output projection
inline constexpr int64_t kMlpOutputDropoutStream = 3;       // the MLP's output projection

/// The label of a position a masked language model does not predict (transformers' ignore_index;
/// the runtime's MLM batches write it, megart::kMlmIgnoredLabel).
inline constexpr int64_t kIgnoredLabel = -100;

// ---- symbols ----------------------------------------------------------------------------------

/// The frontend's entry, `(ids, labels) -> loss`, and what megac-autodiff makes of it.
inline constexpr llvm::StringLiteral kForwardEntry = "forward";
inline constexpr llvm::StringLiteral kTrainStep = "train_step";
/// The one chunk's forward up to the logits, for generation (megac-derive-steps, single-rank fp32
/// programs).
inline constexpr llvm::StringLiteral kLogitsStep = "logits_step";
/// Generation's one position with a KV cache: the frontend's @forward built for seq_length 1, cut
/// to the logits, its layers' functions renamed decode_<name> (megac-derive-decode-step).
inline constexpr llvm::StringLiteral kDecodeStep = "decode_step";
inline constexpr llvm::StringLiteral kDecodePrefix = "decode_";
/// The device grid every collective refers to, and the pipeline schedule.
inline constexpr llvm::StringLiteral kGrid = "grid";
/// Hybrid sharding: @grid's dp axis as replicas x shards (megac-data-parallel makes it).
inline constexpr llvm::StringLiteral kDpGrid = "dp_grid";
/// Expert parallelism: @grid's dp axis as expert-data-parallel groups x ep ranks
/// (megac-data-parallel makes it for the experts' gradient sums).
inline constexpr llvm::StringLiteral kEpGrid = "ep_grid";
inline constexpr llvm::StringLiteral kSchedule = "schedule";
/// The data-parallel gradient buckets (one function per pipeline stage with pp > 1).
inline constexpr llvm::StringLiteral kSyncGradients = "sync_gradients";
inline std::string stageSyncName(int64_t stage) { return kSyncGradients.str() + "_stage" + std::to_string(stage); }
/// The distributed optimizer's parameter all-gathers after the step, and its layout's attribute
/// (on the sync function: param_offsets, buckets as offset/numel pairs, numel, shard_degree).
inline constexpr llvm::StringLiteral kGatherParams = "gather_params";
inline std::string stageGatherName(int64_t stage) { return kGatherParams.str() + "_stage" + std::to_string(stage); }
inline constexpr llvm::StringLiteral kFlatLayoutAttr = "megac.flat_layout";

// ---- grid axes --------------------------------------------------------------------------------
// The axes of @grid, in Megatron's rank order (slowest first): pipeline, data, tensor parallel.

inline constexpr llvm::StringLiteral kPipelineAxis = "pp";
inline constexpr llvm::StringLiteral kDataAxis = "dp";
inline constexpr llvm::StringLiteral kTensorAxis = "tp";

// ---- function names ---------------------------------------------------------------------------
// One suffix scheme for the two halves of anything split for backward: a layer function F
// becomes F_forward / F_backward (megac-autodiff), pipeline chunk c chunk<c>_forward /
// chunk<c>_backward (megac-pipeline-split).

inline constexpr llvm::StringLiteral kForwardSuffix = "_forward";
inline constexpr llvm::StringLiteral kBackwardSuffix = "_backward";
inline std::string forwardHalf(llvm::StringRef name) { return name.str() + kForwardSuffix.str(); }
inline std::string backwardHalf(llvm::StringRef name) { return name.str() + kBackwardSuffix.str(); }
/// A layer's forward half without its saved activations: the forward of a layer whose backward
/// recomputes them (full recomputation).
inline std::string forwardOnly(llvm::StringRef layer) { return layer.str() + "_forward_only"; }
inline std::string chunkName(int64_t chunk) { return "chunk" + std::to_string(chunk); }

} // namespace megac::names
