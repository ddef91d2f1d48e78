// Vocabulary padding over tensor-parallel ranks: a 257-row table padded to 512 and split over
// tp 2 saves the same file as the unpadded table on one rank, and loads it back.
#include "megart/param_store.h"
#include "megart/safetensors.h"
#include "megart/process_grid.h"
#include "megart/train_checkpoint.h"

#include "mpi_test_util.h"

#include <gtest/gtest.h>

using namespace train_test;

TEST(TrainPaddedParallel, Tp2PaddedCheckpointIsTheTp1UnpaddedOne) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  auto pair = mpi_test::group_of(2);
  mpi_test::SharedTempDir shared(*pair);
  auto grid = megart::ProcessGrid::on(*pair, {1, 1, 2}); // tp 2
  const int64_t tp_rank = grid->coord().tp;
  const std::vector<megart::ParamDesc> unpadded = {table_desc(), table_bias()},
                                       padded = {padded_table(256, true), table_bias()};

  // Initialised at tp 2 with padding, saved: the tp 1 unpadded program's file, byte for byte.
  megart::ParamStore split(padded.data(), 2, tp_rank, 2), whole(unpadded.data(), 2);
  split.init(7);
  whole.init(7);
  split.save(shared / "tp2.safetensors", grid->tp());
  if (pair->rank() == 0)
    whole.save(shared / "tp1.safetensors");
  pair->barrier();
  if (pair->rank() == 0)
    EXPECT_EQ(file_bytes(shared / "tp2.safetensors"), file_bytes(shared / "tp1.safetensors"));

  // Other weights at tp 1 -> file -> tp 2: each rank reads its in-range rows, padding is 0;
  // saving again gives the same file.
  for (int64_t k = 0; k < whole.numel(0); ++k)
    whole.param(0)[k] = 0.001f * static_cast<float>(k % 997) - 0.5f;
  if (pair->rank() == 0)
    whole.save(shared / "trained.safetensors");
  pair->barrier();
  megart::ParamStore loaded(padded.data(), 2, tp_rank, 2);
  std::fill(loaded.param(0), loaded.param(0) + loaded.numel(0), 3.0f);
  loaded.load(shared / "trained.safetensors");
  expect_table_rows(loaded.param(0), 256,
                    std::vector<float>(whole.param(0), whole.param(0) + whole.numel(0)),
                    256 * tp_rank);
  megart::TrainState state;
  state.iteration = 2;
  const std::string path =
      megart::save_checkpoint(shared / "ck", state, loaded, {grid->tp()}) + "/model.safetensors";
  pair->barrier();
  if (pair->rank() == 0) { // the same tensors; the checkpoint's file also records its iteration
    const megart::SafetensorsFile saved = megart::SafetensorsFile::open(path);
    const megart::SafetensorsFile whole_file = megart::SafetensorsFile::open(shared / "trained.safetensors");
    ASSERT_EQ(saved.names(), whole_file.names());
    for (const std::string &name : saved.names()) {
      const megart::TensorInfo &info = *saved.find(name);
      std::vector<float> a(static_cast<size_t>(info.numel())), b(a.size());
      saved.read_f32(name, info.shape, a.data());
      whole_file.read_f32(name, info.shape, b.data());
      EXPECT_EQ(a, b) << name;
    }
    EXPECT_EQ(saved.metadata().at("megac_iteration"), "2");
  }
}
