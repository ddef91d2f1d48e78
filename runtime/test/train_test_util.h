// Shared pieces of the Train* tests: a tiny bigram language model written against the
// ProgramDesc contract by hand (no compiler) as a one-stage program, synthetic datasets and an
// in-process runner.
#pragma once

#include "megart/error.h"
#include "megart/indexed_dataset.h"
#include "megart/json.h"
#include "megart/kernels.h"
#include "megart/program.h"
#include "megart/train_driver.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace train_test {

namespace fs = std::filesystem;

constexpr int64_t kVocab = 16;
constexpr int64_t kSeq = 8;

// Bigram model: logits[t] = W[ids[t]] + bias; loss = mean cross-entropy. W is [V, V], either
// one ParamDesc or (kSplit) two row blocks of the same checkpoint tensor "w".
// Parameter table: W (or W rows 0..V/2, W rows V/2..V), then bias "b". One chunk, as megac
// emits every pp = 1 plan: the forward keeps the logits in its stash, the backward reads them.
template <bool kSplit> float *w_row(float *const *table, int32_t id) {
  constexpr int64_t V = kVocab, half = kVocab / 2;
  if (!kSplit)
    return table[0] + id * V;
  return id < half ? table[0] + id * V : table[1] + (id - half) * V;
}
template <int64_t kMicro, bool kSplit>
float bigram_forward(const megart::StepContext &, float *const *params, char *arena, const int32_t *ids,
                     const int32_t *labels, const float *, float *, char *stash) {
  constexpr int64_t T = kMicro * kSeq, V = kVocab;
  if (reinterpret_cast<uintptr_t>(arena) % 64 != 0 || reinterpret_cast<uintptr_t>(stash) % 64 != 0)
    throw megart::Error("arena or stash is not 64-byte aligned");
  float *logits = reinterpret_cast<float *>(stash);
  const int bias = kSplit ? 2 : 1;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < V; ++j)
      logits[t * V + j] = w_row<kSplit>(params, ids[t])[j] + params[bias][j];
  return megart::cpu::cross_entropy_forward(logits, labels, T, V, V);
}
template <int64_t kMicro, bool kSplit>
void bigram_backward(const megart::StepContext &, float *const *, float *const *grads, char *arena,
                     const int32_t *ids, const int32_t *labels, float dloss, const char *stash, const float *,
                     float *) {
  constexpr int64_t T = kMicro * kSeq, V = kVocab;
  const float *logits = reinterpret_cast<const float *>(stash);
  float *dlogits = reinterpret_cast<float *>(arena);
  megart::cpu::cross_entropy_backward(dlogits, dloss, logits, labels, T, V, V);
  const int bias = kSplit ? 2 : 1;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < V; ++j) {
      w_row<kSplit>(grads, ids[t])[j] += dlogits[t * V + j];
      grads[bias][j] += dlogits[t * V + j];
    }
}

constexpr int64_t kArenaFloats(int64_t micro) { return 2 * micro * kSeq * kVocab; }
constexpr int64_t kStashBytes(int64_t micro) { return micro * kSeq * kVocab * 4; } // the logits

inline megart::ParamDesc w_desc() {
  return {"w", 2, {kVocab, kVocab}, {0, 0}, {kVocab, kVocab}, megart::ParamInit::Normal, 0.02f,
          true};
}
inline megart::ParamDesc b_desc() {
  return {"b", 1, {kVocab}, {0}, {kVocab}, megart::ParamInit::Zeros, 0.0f, false};
}
// Rows [first, first + rows) of "w".
inline megart::ParamDesc w_rows(int64_t first, int64_t rows) {
  megart::ParamDesc d = w_desc();
  d.shape[0] = rows;
  d.offsets[0] = first;
  return d;
}

// The one-stage tables megac emits: chunk 0's forward and backward, then what closes the
// iteration; with the distributed optimizer over several dp ranks, the parameter gather too.
inline constexpr megart::PipeOp kOneStageOps[] = {
    {megart::PipeOpKind::Forward, 0, 0, -1}, {megart::PipeOpKind::Backward, 0, 0, -1},
    {megart::PipeOpKind::GradSync, -1, -1, -1}, {megart::PipeOpKind::OptimizerStep, -1, -1, -1},
    {megart::PipeOpKind::ParamGather, -1, -1, -1}};

// The gradient bucket megac compiles for a no_shard plan whose gradients fit one bucket
// (megac-data-parallel): the whole table, one flat buffer in table order, summed over dp at once.
// kLast: the table's last entry, of kLastNumel elements.
template <int kLast, int64_t kLastNumel> void sync_whole_table(const megart::StepContext &ctx, float *const *grads) {
  ctx.grad_sync->start(grads[0], (grads[kLast] + kLastNumel) - grads[0]);
}

// A one-stage ProgramDesc with its own tables (ProgramDesc only points at them; they live on the
// heap, so a moved Program stays valid: call relink() after changing `params` or copying).
struct Program {
  std::vector<megart::ParamDesc> params;
  std::vector<megart::ChunkDesc> chunk = std::vector<megart::ChunkDesc>(1);
  std::vector<megart::PipelineStageDesc> stage = std::vector<megart::PipelineStageDesc>(1);
  megart::ProgramDesc desc{};
  megart::PipelineStageDesc &stage0() { return stage[0]; }
  void relink() {
    stage[0].params = params.data();
    stage[0].num_params = static_cast<int64_t>(params.size());
    stage[0].chunks = chunk.data();
    desc.stages = stage.data();
  }
  // Chunk 0 is (forward, backward) with `stash_bytes` per microbatch, in `arena_bytes`.
  void set_chunk(megart::ChunkForwardFn forward, megart::ChunkBackwardFn backward, int64_t stash_bytes,
                 int64_t arena_bytes) {
    chunk[0] = {0, forward, backward, stash_bytes, 0, 0};
    stage[0].num_chunks = 1;
    stage[0].arena_bytes = arena_bytes;
    stage[0].predicted_peak_stash = 1;
    desc.num_microbatches = 1;
    desc.pipeline_schedule = "1f1b";
    relink();
  }
  // The table: F0.0 B0.0, GradSync, OptimizerStep and (`gathers`) ParamGather.
  void set_one_stage_ops(bool gathers = false) {
    stage[0].ops = kOneStageOps;
    stage[0].num_ops = gathers ? 5 : 4;
  }
};

template <int64_t kMicro, bool kSplit = false> Program bigram_program() {
  Program p;
  if (kSplit)
    p.params = {w_rows(0, kVocab / 2), w_rows(kVocab / 2, kVocab / 2), b_desc()};
  else
    p.params = {w_desc(), b_desc()};
  p.desc.summary = "bigram test model";
  p.desc.micro_batch_size = kMicro;
  p.desc.seq_length = kSeq;
  p.desc.vocab_size = kVocab;
  p.set_chunk(&bigram_forward<kMicro, kSplit>, &bigram_backward<kMicro, kSplit>, kStashBytes(kMicro),
              kArenaFloats(kMicro) * 4);
  p.set_one_stage_ops();
  p.stage0().sync_gradients = &sync_whole_table<kSplit ? 2 : 1, kVocab>; // ends with b; summed where dp > 1
  return p;
}

// The bigram model with W split into tp row blocks (tp_split_dim 0) — a vocabulary-parallel
// embedding lookup: the rank that holds row ids[t] contributes it, the others zeros, and an
// all-reduce over tp gives every rank the full logits, as Megatron's VocabParallelEmbedding
// does. The bias is replicated: every tp rank computes the same (full) gradient for it.
// Parameter table: W block, then bias "b".
template <int64_t kMicro>
float bigram_tp_forward(const megart::StepContext &ctx, float *const *params, char *, const int32_t *ids,
                        const int32_t *labels, const float *, float *, char *stash) {
  constexpr int64_t T = kMicro * kSeq, V = kVocab;
  const int64_t rows = V / ctx.tp->size(), first = ctx.tp->rank() * rows;
  float *logits = reinterpret_cast<float *>(stash);
  auto owned = [&](int32_t id) { return id >= first && id < first + rows; };
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < V; ++j)
      logits[t * V + j] = owned(ids[t]) ? params[0][(ids[t] - first) * V + j] : 0.0f;
  ctx.tp->all_reduce_sum(logits, T * V);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < V; ++j)
      logits[t * V + j] += params[1][j];
  return megart::cpu::cross_entropy_forward(logits, labels, T, V, V);
}
template <int64_t kMicro>
void bigram_tp_backward(const megart::StepContext &ctx, float *const *, float *const *grads, char *arena,
                        const int32_t *ids, const int32_t *labels, float dloss, const char *stash, const float *,
                        float *) {
  constexpr int64_t T = kMicro * kSeq, V = kVocab;
  const int64_t rows = V / ctx.tp->size(), first = ctx.tp->rank() * rows;
  const float *logits = reinterpret_cast<const float *>(stash);
  float *dlogits = reinterpret_cast<float *>(arena);
  auto owned = [&](int32_t id) { return id >= first && id < first + rows; };
  megart::cpu::cross_entropy_backward(dlogits, dloss, logits, labels, T, V, V);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < V; ++j) {
      if (owned(ids[t]))
        grads[0][(ids[t] - first) * V + j] += dlogits[t * V + j];
      grads[1][j] += dlogits[t * V + j];
    }
}

// bigram_tp_forward / backward compiled for a tp x 1 x dp plan.
template <int64_t kMicro> Program bigram_tp_program(int64_t tp, int64_t dp = 1) {
  Program p = bigram_program<kMicro>();
  p.params[0].shape[0] = kVocab / tp;
  p.params[0].tp_split_dim = 0;
  p.set_chunk(&bigram_tp_forward<kMicro>, &bigram_tp_backward<kMicro>, kStashBytes(kMicro), kArenaFloats(kMicro) * 4);
  p.desc.tensor_parallel_size = tp;
  p.desc.data_parallel_size = dp;
  return p;
}

// Vocabulary padding (ParamDesc::padded): a [257, 64] embedding table, its padded blocks and a
// bias beside it.
constexpr int64_t kTableRows = 257, kTableCols = 64;
inline megart::ParamDesc table_desc() {
  return {"transformer.wte.weight", 2, {kTableRows, kTableCols}, {0, 0}, {kTableRows, kTableCols},
          megart::ParamInit::Normal, 0.02f, true};
}
// A padded block of `rows` rows from row 0 (tp rank 0's when split over tp along the rows).
inline megart::ParamDesc padded_table(int64_t rows, bool tp_split) {
  megart::ParamDesc d = table_desc();
  d.shape[0] = rows;
  d.tp_split_dim = tp_split ? 0 : -1;
  d.padded = true;
  return d;
}
inline megart::ParamDesc table_bias() {
  return {"transformer.ln_f.bias", 1, {kTableCols}, {0}, {kTableCols}, megart::ParamInit::Normal,
          0.02f, false};
}
// Row i of `block` (`rows` rows) is row first + i of the unpadded table `full`, or 0 past it.
inline void expect_table_rows(const float *block, int64_t rows, const std::vector<float> &full,
                              int64_t first) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < kTableCols; ++c) {
      const int64_t row = first + i;
      const float expected = row < kTableRows ? full[row * kTableCols + c] : 0.0f;
      ASSERT_EQ(block[i * kTableCols + c], expected) << "table row " << row << " column " << c;
    }
}

inline std::string file_bytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A token stream a bigram model can learn: mostly next = (5 * cur + 3) % V, sometimes random.
inline std::vector<std::vector<int32_t>> bigram_documents(int num_docs, int doc_len,
                                                          int32_t max_token = kVocab - 1) {
  uint64_t state = 42;
  auto next_random = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);
  };
  std::vector<std::vector<int32_t>> docs;
  for (int d = 0; d < num_docs; ++d) {
    std::vector<int32_t> doc;
    int32_t cur = static_cast<int32_t>(next_random() % kVocab);
    for (int i = 0; i < doc_len; ++i) {
      doc.push_back(std::min(cur, max_token));
      cur = next_random() % 10 < 8 ? (5 * cur + 3) % kVocab
                                   : static_cast<int32_t>(next_random() % kVocab);
    }
    docs.push_back(doc);
  }
  return docs;
}

inline void write_dataset(const std::string &prefix,
                          const std::vector<std::vector<int32_t>> &docs) {
  megart::IndexedDatasetWriter w(prefix, megart::TokenDType::UInt16);
  for (const auto &doc : docs)
    w.add_document(doc);
  w.finalize();
}

class TempDir {
public:
  TempDir() {
    char tmpl[] = "/tmp/megart-train-XXXXXX";
    if (!mkdtemp(tmpl))
      throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string &name) const { return path_ + "/" + name; }
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

struct RunResult {
  int code = -1;
  std::string out, err;
};

// Runs an entry point `entry(argc, argv, out, err)` on "train" + args, capturing its output.
template <typename Entry>
RunResult run_capturing(const std::vector<std::string> &args, Entry &&entry) {
  std::vector<const char *> argv{"train"};
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  std::ostringstream out, err;
  RunResult r;
  r.code = entry(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

inline RunResult run_training(const megart::ProgramDesc &program,
                              const std::vector<std::string> &args) {
  return run_capturing(args, [&](int argc, const char *const *argv, std::ostream &out, std::ostream &err) {
    return megart::train_main(argc, argv, program, out, err);
  });
}

// Every line of a JSONL file, parsed.
inline std::vector<megart::JsonValue> read_jsonl(const std::string &path) {
  std::ifstream in(path);
  std::vector<megart::JsonValue> rows;
  for (std::string line; std::getline(in, line);)
    if (!line.empty())
      rows.push_back(megart::parse_json(line, path));
  return rows;
}

inline std::vector<double> losses(const std::vector<megart::JsonValue> &rows) {
  std::vector<double> out;
  for (const auto &r : rows)
    out.push_back(r.get("lm_loss")->number);
  return out;
}

} // namespace train_test
