#include "megart/error.h"
#include "megart/param_store.h"
#include "megart/safetensors.h"
#include "megart/train_checkpoint.h"

#include "train_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

using megart::ParamDesc;
using megart::ParamInit;
using megart::ParamStore;
using ::testing::HasSubstr;
using train_test::TempDir;

namespace {

// GPT-2-like layout: a fused [4, 6] weight held as three column blocks, plus a bias.
std::vector<ParamDesc> fused_layout() {
  std::vector<ParamDesc> d;
  for (int64_t k = 0; k < 3; ++k)
    d.push_back({"attn.c_attn.weight", 2, {4, 2}, {0, 2 * k}, {4, 6}, ParamInit::Normal, 1.0f,
                 true});
  d.push_back({"attn.c_attn.bias", 1, {6}, {0}, {6}, ParamInit::Normal, 1.0f, false});
  return d;
}

std::vector<float> copy_param(const ParamStore &s, int64_t i) {
  return std::vector<float>(s.param(i), s.param(i) + s.numel(i));
}

void write_tensors(const std::string &path, const std::vector<megart::NamedTensor> &tensors) {
  megart::write_safetensors(path, tensors, {{"format", "pt"}});
}

} // namespace

TEST(TrainParamStore, SaveThenLoadIsExact) {
  TempDir dir;
  const auto layout = fused_layout();
  ParamStore a(layout.data(), static_cast<int64_t>(layout.size()));
  a.init(99);
  a.save(dir / "m.safetensors");

  ParamStore b(layout.data(), static_cast<int64_t>(layout.size()));
  b.load(dir / "m.safetensors");
  for (int64_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(copy_param(a, i), copy_param(b, i)) << "parameter " << i;

  // The file holds full tensors under their checkpoint names, assembled from the blocks.
  const auto file = megart::SafetensorsFile::open(dir / "m.safetensors");
  EXPECT_EQ(file.names(), (std::vector<std::string>{"attn.c_attn.bias", "attn.c_attn.weight"}));
  EXPECT_EQ(file.metadata().at("format"), "pt");
  const std::vector<float> full = file.read_f32("attn.c_attn.weight", {4, 6});
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 6; ++c)
      EXPECT_EQ(full[r * 6 + c], a.param(c / 2)[r * 2 + c % 2]);
  EXPECT_EQ(a.num_tensor_elements(), 30);
}

TEST(TrainParamStore, InitMatchesWholeTensorInit) {
  // The fused blocks start from the same values a single [4, 6] tensor would get.
  const auto layout = fused_layout();
  ParamStore split(layout.data(), 4);
  split.init(5);
  std::vector<ParamDesc> whole = {
      {"attn.c_attn.weight", 2, {4, 6}, {0, 0}, {4, 6}, ParamInit::Normal, 1.0f, true},
      layout[3]};
  ParamStore one(whole.data(), 2);
  one.init(5);
  EXPECT_EQ(split.assemble(split.tensors()[0]), copy_param(one, 0));
}

TEST(TrainParamStore, LoadNamesEveryMismatchAndChangesNothing) {
  TempDir dir;
  const auto layout = fused_layout();
  ParamStore s(layout.data(), 4);
  s.init(1);
  const std::vector<float> before = copy_param(s, 0);
  std::vector<float> data(64, 0.5f);
  write_tensors(dir / "bad.safetensors", {{"attn.c_attn.weight", {4, 5}, data.data()},
                                          {"lm_head.weight", {2, 2}, data.data()},
                                          {"wte", {3}, data.data()}});
  try {
    s.load(dir / "bad.safetensors");
    FAIL() << "load accepted a mismatched checkpoint";
  } catch (const megart::Error &e) {
    const std::string m = e.what();
    EXPECT_THAT(m, HasSubstr("missing tensor 'attn.c_attn.bias' [6]"));
    EXPECT_THAT(m, HasSubstr("tensor 'attn.c_attn.weight' has shape [4, 5], the program needs "
                             "[4, 6]"));
    EXPECT_THAT(m, HasSubstr("2 tensors not used by the program: 'lm_head.weight', 'wte'"));
  }
  EXPECT_EQ(copy_param(s, 0), before);
}

TEST(TrainParamStore, LayoutErrors) {
  auto rejects = [](std::vector<ParamDesc> d, const std::string &text) {
    try {
      ParamStore s(d.data(), static_cast<int64_t>(d.size()));
      ADD_FAILURE() << "accepted; expected: " << text;
    } catch (const megart::Error &e) {
      EXPECT_THAT(e.what(), HasSubstr(text));
    }
  };
  auto layout = fused_layout();
  auto overlap = layout;
  overlap[1].offsets[1] = 1;
  rejects(overlap, "overlaps");
  auto gap = layout;
  gap.erase(gap.begin() + 1);
  rejects(gap, "has 24 elements but its blocks hold 16");
  auto outside = layout;
  outside[2].offsets[1] = 5;
  rejects(outside, "does not fit in tensor shape [4, 6]");
  auto shapes = layout;
  shapes[1].full_shape[0] = 5;
  rejects(shapes, "says tensor shape [5, 6]");
}

TEST(TrainParamStore, CheckpointFolderLayout) {
  TempDir dir;
  const auto layout = fused_layout();
  ParamStore s(layout.data(), 4);
  s.init(3);
  megart::SelfCommunicator self;
  megart::TrainState state;
  state.iteration = 12;
  const std::string folder = megart::save_checkpoint(dir / "ckpt", state, s, {self});
  EXPECT_EQ(folder, dir / "ckpt/iter_0000012");
  std::ifstream tracker(dir / "ckpt/latest_checkpointed_iteration.txt");
  std::string text((std::istreambuf_iterator<char>(tracker)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "12");
  // The three files and nothing else (no temporaries, no staging folder).
  std::set<std::string> files;
  for (const auto &e : std::filesystem::directory_iterator(folder))
    files.insert(e.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"model.safetensors", "optimizer.safetensors",
                                          "train_state.json"}));
  std::set<std::string> top;
  for (const auto &e : std::filesystem::directory_iterator(dir / "ckpt"))
    top.insert(e.path().filename().string());
  EXPECT_EQ(top, (std::set<std::string>{"iter_0000012", "latest_checkpointed_iteration.txt"}));
}

namespace {
// "w" [8, 6] split over tp ranks along `dim` (tp rank 0's block), plus a replicated bias.
std::vector<ParamDesc> tp_layout(int64_t tp, int dim) {
  ParamDesc w{"w", 2, {8, 6}, {0, 0}, {8, 6}, ParamInit::Normal, 1.0f, true};
  w.shape[dim] /= tp;
  w.tp_split_dim = dim;
  return {w, {"b", 1, {6}, {0}, {6}, ParamInit::Normal, 1.0f, false}};
}
} // namespace

TEST(TrainParamStore, TensorParallelBlocksStartFromTheSameWeights) {
  const auto whole = tp_layout(1, 0);
  ParamStore one(whole.data(), 2);
  one.init(11);
  for (int dim : {0, 1}) {
    const auto layout = tp_layout(2, dim);
    for (int64_t r = 0; r < 2; ++r) {
      ParamStore s(layout.data(), 2, r, 2);
      s.init(11);
      EXPECT_EQ(s.desc(0).offsets[dim], r * layout[0].shape[dim]);
      EXPECT_EQ(s.num_tensor_elements(), 54);
      // Each element of the block is the whole tensor's element at the same place.
      megart::for_each_block_row(s.desc(0), [&](int64_t f, int64_t b, int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          EXPECT_EQ(s.param(0)[b + i], one.param(0)[f + i]) << "dim " << dim << " rank " << r;
      });
      EXPECT_EQ(copy_param(s, 1), copy_param(one, 1)); // the replicated bias
    }
  }
}

TEST(TrainParamStore, TensorParallelLoadReadsThisRanksBlock) {
  TempDir dir;
  const auto whole = tp_layout(1, 0);
  ParamStore one(whole.data(), 2);
  one.init(4);
  one.save(dir / "m.safetensors");
  const auto layout = tp_layout(2, 1);
  ParamStore r1(layout.data(), 2, 1, 2);
  r1.load(dir / "m.safetensors");
  for (int64_t row = 0; row < 8; ++row)
    for (int64_t c = 0; c < 3; ++c)
      EXPECT_EQ(r1.param(0)[row * 3 + c], one.param(0)[row * 6 + 3 + c]);
  // Without the tp communicator a split store cannot write a complete checkpoint.
  EXPECT_THROW(r1.save(dir / "x.safetensors"), megart::Error);
}

// Stacked experts [4, 2, 3] split over 2 ep ranks (ParamDesc::ep_split_dim 0): each rank holds 2
// experts, rank 1 the last two; together (and only together) the ranks hold the tensor.
TEST(TrainParamStore, ExpertParallelBlocksAreConsecutiveExperts) {
  ParamDesc experts{"e", 3, {2, 2, 3}, {0, 0, 0}, {4, 2, 3}, ParamInit::Normal, 1.0f, true};
  experts.ep_split_dim = 0;
  ParamDesc whole = experts;
  whole.shape[0] = 4, whole.ep_split_dim = -1;
  ParamStore one(&whole, 1);
  one.init(5);
  const std::vector<float> all = one.assemble(one.tensors()[0]);
  for (int64_t r = 0; r < 2; ++r) {
    ParamStore s(&experts, 1, 0, 1, megart::cpu_device(), nullptr, nullptr, r, 2);
    EXPECT_EQ(s.desc(0).offsets[0], 2 * r);
    EXPECT_TRUE(s.ep_split(0));
    s.init(5); // the same weights as the whole tensor's experts 2r and 2r + 1
    for (int64_t i = 0; i < 12; ++i)
      EXPECT_EQ(s.param(0)[i], all[static_cast<size_t>(12 * r + i)]) << "ep rank " << r << " element " << i;
  }
  auto rejects = [](ParamDesc d, int64_t ep, const std::string &text) {
    try {
      megart::validate_param_layout(&d, 1, 1, ep);
      ADD_FAILURE() << "accepted; expected: " << text;
    } catch (const megart::Error &e) {
      EXPECT_THAT(e.what(), HasSubstr(text));
    }
  };
  megart::validate_param_layout(&experts, 1, 1, 2);
  rejects(experts, 1, "has 24 elements but its blocks hold 12; a program must hold whole tensors");
  rejects(experts, 4, "parameter 0 ('e') on ep rank 2: block [2, 2, 3] at offsets [4, 0, 0] does not fit");
  ParamDesc same = experts;
  same.tp_split_dim = 0;
  rejects(same, 2, "has ep_split_dim 0 (tp_split_dim 0)");
  // Expert tensor parallelism: each expert's rows over tp too; tp rank t, ep rank e holds experts
  // 2e and 2e + 1, rows t.
  ParamDesc both = experts;
  both.shape[1] = 1, both.tp_split_dim = 1;
  megart::validate_param_layout(&both, 1, 2, 2);
  EXPECT_THROW(megart::validate_param_layout(&both, 1, 1, 2), megart::Error); // rows 1 of 2: not whole
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t e = 0; e < 2; ++e) {
      ParamStore s(&both, 1, t, 2, megart::cpu_device(), nullptr, nullptr, e, 2);
      EXPECT_EQ(s.desc(0).offsets[0], 2 * e);
      EXPECT_EQ(s.desc(0).offsets[1], t);
      s.init(5); // expert 2e + x, row t of the whole tensor's
      for (int64_t x = 0; x < 2; ++x)
        for (int64_t c = 0; c < 3; ++c)
          EXPECT_EQ(s.param(0)[x * 3 + c], all[static_cast<size_t>((2 * e + x) * 6 + t * 3 + c)])
              << "tp rank " << t << " ep rank " << e;
    }
}

TEST(TrainParamStore, TensorParallelLayoutErrors) {
  auto rejects = [](std::vector<ParamDesc> d, int64_t tp, const std::string &text) {
    try {
      megart::validate_param_layout(d.data(), static_cast<int64_t>(d.size()), tp);
      ADD_FAILURE() << "accepted; expected: " << text;
    } catch (const megart::Error &e) {
      EXPECT_THAT(e.what(), HasSubstr(text));
    }
  };
  megart::validate_param_layout(tp_layout(2, 0).data(), 2, 2); // the union covers "w"
  rejects(tp_layout(2, 0), 1, "has 48 elements but its blocks hold 24; a program must hold "
                              "whole tensors");
  rejects(tp_layout(4, 0), 2, "has 48 elements but its blocks hold 24 over the 2 tp ranks; the "
                              "tp ranks together must hold whole tensors");
  rejects(tp_layout(2, 0), 4, "parameter 0 ('w') on tp rank 2: block [4, 6] at offsets [8, 0] "
                              "does not fit in tensor shape [8, 6]");
  auto bad_dim = tp_layout(2, 0);
  bad_dim[0].tp_split_dim = 2;
  rejects(bad_dim, 2, "parameter 0 ('w') has tp_split_dim 2; it must be -1 (not split) or a "
                      "dimension 0..1");
}
