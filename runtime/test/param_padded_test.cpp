// Vocabulary padding (ParamDesc::padded): blocks that reach past their checkpoint tensor start
// from the unpadded values with zero padding, and load and save the unpadded tensor.
#include "megart/error.h"
#include "megart/param_init.h"
#include "megart/param_layout.h"
#include "megart/param_store.h"

#include "train_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using megart::ParamDesc;
using megart::ParamInit;
using megart::ParamStore;
using ::testing::HasSubstr;
using namespace train_test;

namespace {

// The block's initial values; NaN first, so every element must be written.
std::vector<float> init_block(const ParamDesc &d, uint64_t seed) {
  std::vector<float> buf(static_cast<size_t>(megart::block_numel(d)), NAN);
  megart::init_param_block(d, seed, buf.data());
  return buf;
}

std::vector<float> copy_param(const ParamStore &s, int64_t i) {
  return std::vector<float>(s.param(i), s.param(i) + s.numel(i));
}

void validate(const std::vector<ParamDesc> &d, int64_t tp) {
  megart::validate_param_layout(d.data(), static_cast<int64_t>(d.size()), tp);
}

void rejects(const std::vector<ParamDesc> &d, int64_t tp, const std::string &text) {
  try {
    validate(d, tp);
    ADD_FAILURE() << "accepted; expected: " << text;
  } catch (const megart::Error &e) {
    EXPECT_THAT(e.what(), HasSubstr(text));
  }
}

} // namespace

TEST(ParamPadded, InitIsTheUnpaddedValuesAndZeroPadding) {
  const std::vector<float> full = init_block(table_desc(), 1234);
  // tp 1, 257 rows padded to 384.
  expect_table_rows(init_block(padded_table(384, false), 1234).data(), 384, full, 0);
  // 257 padded to 512 at tp 2 and to 1024 at tp 4 (ranks 2 and 3 hold only padding).
  for (int64_t tp : {2, 4})
    for (int64_t r = 0; r < tp; ++r) {
      SCOPED_TRACE("tp " + std::to_string(tp) + " rank " + std::to_string(r));
      const ParamDesc block = megart::tp_block(padded_table(256, true), r);
      expect_table_rows(init_block(block, 1234).data(), 256, full, 256 * r);
    }
}

TEST(ParamPadded, OnesZerosAndPaddingInEveryDimension) {
  ParamDesc ones{"ln.weight", 1, {8}, {0}, {5}, ParamInit::Ones, 0.0f, false};
  ones.padded = true;
  EXPECT_EQ(init_block(ones, 1), (std::vector<float>{1, 1, 1, 1, 1, 0, 0, 0}));
  ones.init = ParamInit::Zeros;
  EXPECT_EQ(init_block(ones, 1), std::vector<float>(8, 0.0f));
  // A [3, 5] tensor in a [4, 8] block: the last dimension is clipped too.
  const ParamDesc whole{"w", 2, {3, 5}, {0, 0}, {3, 5}, ParamInit::Normal, 1.0f, true};
  ParamDesc padded = whole;
  padded.shape[0] = 4;
  padded.shape[1] = 8;
  padded.padded = true;
  const std::vector<float> ref = init_block(whole, 3), got = init_block(padded, 3);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 8; ++j)
      EXPECT_EQ(got[i * 8 + j], i < 3 && j < 5 ? ref[i * 5 + j] : 0.0f) << i << ", " << j;
  // Copies move only the part inside the tensor.
  std::vector<float> back(15, NAN), block(32, NAN);
  megart::copy_block_to_full(padded, got.data(), back.data());
  EXPECT_EQ(back, ref);
  megart::copy_block_from_full(padded, ref.data(), block.data());
  EXPECT_EQ(block, got);
  EXPECT_EQ(megart::block_real_numel(padded), 15);
}

TEST(ParamPadded, ValidationAcceptsPaddedTensorParallelLayouts) {
  EXPECT_NO_THROW(validate({padded_table(384, false), table_bias()}, 1)); // 257 -> 384
  EXPECT_NO_THROW(validate({padded_table(256, true), table_bias()}, 2));  // 257 -> 512
  EXPECT_NO_THROW(validate({padded_table(256, true), table_bias()}, 4));  // 257 -> 1024
  EXPECT_NO_THROW(validate({padded_table(257, false)}, 1));               // no padding at all
  // Two blocks of one tensor, the second reaching past it.
  ParamDesc tail = padded_table(100, false);
  tail.offsets[0] = 200;
  ParamDesc head = table_desc();
  head.shape[0] = 200;
  EXPECT_NO_THROW(validate({head, tail}, 1));
}

TEST(ParamPadded, ValidationRejectsHolesOverlapsAndUnpaddedOverhang) {
  ParamDesc overhang = padded_table(384, false);
  overhang.padded = false;
  rejects({overhang}, 1, "parameter 0 ('transformer.wte.weight'): block [384, 64] at offsets "
                         "[0, 0] does not fit in tensor shape [257, 64]");
  // 128 rows per tp rank: rows 256 of the tensor are held by no rank.
  rejects({padded_table(128, true)}, 2, "tensor 'transformer.wte.weight' [257, 64] has 16448 "
                                        "elements but its blocks hold 16384 over the 2 tp ranks");
  ParamDesc head = table_desc(), tail = padded_table(100, false);
  head.shape[0] = 200;
  tail.offsets[0] = 201;
  rejects({head, tail}, 1, "has 16448 elements but its blocks hold 16384");
  // Blocks that overlap only in the padding still overlap.
  ParamDesc first = padded_table(300, false), second = padded_table(100, false);
  second.offsets[0] = 260;
  rejects({first, second}, 1, "parameter 1 ('transformer.wte.weight') (offsets [260, 0]) "
                              "overlaps parameter 0 ('transformer.wte.weight') (offsets [0, 0])");
  ParamDesc negative = padded_table(384, false);
  negative.offsets[0] = -1;
  rejects({negative}, 1, "parameter 0 ('transformer.wte.weight'): padded block [384, 64] at "
                         "offsets [-1, 0] does not fit");
}

TEST(ParamPadded, ParameterCountLeavesOutPadding) {
  const std::vector<ParamDesc> layout = {padded_table(384, false), table_bias()};
  ParamStore s(layout.data(), 2);
  EXPECT_EQ(s.numel(0), 384 * kTableCols);
  EXPECT_EQ(s.num_tensor_elements(), (kTableRows + 1) * kTableCols);
  EXPECT_EQ(s.tensors()[0].shape, (std::vector<int64_t>{kTableRows, kTableCols}));
}

TEST(TrainPadded, SaveLoadRoundTripWritesTheUnpaddedFile) {
  TempDir dir;
  const std::vector<ParamDesc> unpadded = {table_desc(), table_bias()},
                               padded = {padded_table(384, false), table_bias()};
  ParamStore u(unpadded.data(), 2), p(padded.data(), 2);
  u.init(7);
  p.init(7);
  u.save(dir / "unpadded.safetensors");
  p.save(dir / "padded.safetensors");
  EXPECT_EQ(file_bytes(dir / "padded.safetensors"), file_bytes(dir / "unpadded.safetensors"));

  // Other values than the init's, so load must really copy them; the padding is set to 0.
  for (int64_t k = 0; k < u.numel(0); ++k)
    u.param(0)[k] = 0.001f * static_cast<float>(k % 997) - 0.5f;
  u.save(dir / "trained.safetensors");
  ParamStore q(padded.data(), 2);
  std::fill(q.param(0), q.param(0) + q.numel(0), 3.0f);
  q.load(dir / "trained.safetensors");
  expect_table_rows(q.param(0), 384, copy_param(u, 0), 0);
  EXPECT_EQ(copy_param(q, 1), copy_param(u, 1));
  q.save(dir / "again.safetensors");
  EXPECT_EQ(file_bytes(dir / "again.safetensors"), file_bytes(dir / "trained.safetensors"));

  // Tp rank 1 of 2 (rows 256..511) reads row 256 and zeros.
  const std::vector<ParamDesc> tp2 = {padded_table(256, true), table_bias()};
  ParamStore r1(tp2.data(), 2, 1, 2);
  r1.load(dir / "trained.safetensors");
  expect_table_rows(r1.param(0), 256, copy_param(u, 0), 256);
}

namespace {
class TrainPaddedRun : public ::testing::Test {
protected:
  void SetUp() override { write_dataset(dir_ / "data", bigram_documents(40, 50)); }
  RunResult run(const megart::ProgramDesc &program, const std::string &name) const {
    return run_training(program, {"--data-path", dir_ / "data", "--train-iters", "5", "--lr",
                                  "0.05", "--seed", "7", "--metrics-file", dir_ / (name + ".jsonl"),
                                  "--save", dir_ / name});
  }
  TempDir dir_;
};
} // namespace

TEST_F(TrainPaddedRun, TrainsAndSavesAsTheUnpaddedProgram) {
  // The bigram model's W [16, 16] held as a [24, 16] padded block: the step never touches rows
  // 16..23, so they keep zero gradients.
  const Program unpadded = bigram_program<2>();
  Program padded = bigram_program<2>();
  padded.params[0].shape[0] = 24;
  padded.params[0].padded = true;
  padded.relink();
  const RunResult a = run(unpadded.desc, "unpadded"), b = run(padded.desc, "padded");
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_THAT(b.out, HasSubstr("parameters: 272 in 2 tensors"));
  const auto rows_a = read_jsonl(dir_ / "unpadded.jsonl"), rows_b = read_jsonl(dir_ / "padded.jsonl");
  EXPECT_EQ(losses(rows_a), losses(rows_b));
  for (size_t i = 0; i < rows_a.size() && i < rows_b.size(); ++i)
    EXPECT_EQ(rows_a[i].get("grad_norm")->number, rows_b[i].get("grad_norm")->number);
  EXPECT_EQ(file_bytes(dir_ / "padded/iter_0000005/model.safetensors"),
            file_bytes(dir_ / "unpadded/iter_0000005/model.safetensors"));
}
