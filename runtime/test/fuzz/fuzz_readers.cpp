// Bounded fuzzing of the runtime's readers of outside files: Megatron .bin/.idx datasets,
// safetensors checkpoints, train_state.json and checkpoint trackers. Each round takes a valid
// file, damages it (bit flips, overwritten bytes, extreme integers over length fields, cuts,
// appended bytes) with a fixed-seed generator, and reads it the way training does. A reader may
// refuse with megart::Error; anything else (another exception, a crash, a sanitizer report in
// the sanitizer build) fails the run. Usage: megart-fuzz-readers [ROUNDS [SEED]].
#include "megart/error.h"
#include "megart/indexed_dataset.h"
#include "megart/safetensors.h"
#include "megart/train_checkpoint.h"
#include "megart/train_state.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <typeinfo>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

namespace {

Bytes read_file(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const fs::path &path, const Bytes &bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// One damaged copy of `good`: 1-4 edits of the kinds a bad disk, a bad tool or a bad actor makes.
Bytes damage(const Bytes &good, std::mt19937_64 &rng) {
  Bytes b = good;
  auto pick = [&](uint64_t n) { return n ? rng() % n : 0; };
  static const uint64_t kExtremes[] = {0, 1, 0x7f, 0xff, 0x7fffffff, 0x80000000, 0xffffffff,
                                       0x7fffffffffffffffull, 0x8000000000000000ull, ~0ull,
                                       1ull << 40, 1ull << 62};
  const int edits = 1 + static_cast<int>(pick(4));
  for (int e = 0; e < edits; ++e) {
    switch (pick(6)) {
    case 0: // flip a bit
      if (!b.empty())
        b[pick(b.size())] ^= static_cast<unsigned char>(1u << pick(8));
      break;
    case 1: // overwrite a byte
      if (!b.empty())
        b[pick(b.size())] = static_cast<unsigned char>(rng());
      break;
    case 2: { // an extreme integer over 4 or 8 bytes (lengths, counts, offsets)
      const uint64_t v = kExtremes[pick(std::size(kExtremes))];
      const size_t width = pick(2) ? 8 : 4;
      if (b.size() >= width) {
        const size_t at = pick(b.size() - width + 1);
        std::memcpy(b.data() + at, &v, width);
      }
      break;
    }
    case 3: // cut
      b.resize(pick(b.size() + 1));
      break;
    case 4: // append
      for (uint64_t i = pick(64); i > 0; --i)
        b.push_back(static_cast<unsigned char>(rng()));
      break;
    default: // a digit or JSON character where the text had another (for the text formats)
      if (!b.empty()) {
        static const char kText[] = "0123456789-+.eE\"{}[],:nul ";
        b[pick(b.size())] = static_cast<unsigned char>(kText[pick(sizeof kText - 1)]);
      }
    }
  }
  return b;
}

struct Target {
  const char *name;
  std::function<void(const fs::path &dir)> make_good; // writes the valid file(s)
  std::vector<std::string> files;                     // which of them to damage
  std::function<void(const fs::path &dir)> read;      // reads them as training does
};

void read_dataset(const fs::path &dir) {
  const megart::IndexedDataset ds = megart::IndexedDataset::open((dir / "d").string());
  std::vector<int32_t> tokens(9);
  const int64_t n = ds.num_samples(8);
  for (int64_t i = 0; i < n && i < 64; ++i)
    ds.sample(i, 8, tokens.data());
}

void read_safetensors(const fs::path &dir) {
  const megart::SafetensorsFile f = megart::SafetensorsFile::open((dir / "m.safetensors").string());
  for (const std::string &name : f.names()) {
    const megart::TensorInfo &info = f.get(name);
    if (info.numel() <= (1 << 16))
      f.read_f32(name, info.shape);
  }
}

std::vector<Target> targets() {
  return {
      {"dataset",
       [](const fs::path &dir) {
         megart::IndexedDatasetWriter w((dir / "d").string(), megart::TokenDType::UInt16);
         for (int doc = 0; doc < 6; ++doc)
           w.add_document(std::vector<int32_t>(static_cast<size_t>(17 + 5 * doc), 7 * doc));
         w.finalize();
       },
       {"d.idx", "d.bin"},
       read_dataset},
      {"safetensors",
       [](const fs::path &dir) {
         const std::vector<float> a(12, 0.5f), b(4, -1.0f);
         megart::write_safetensors((dir / "m.safetensors").string(),
                                   {{"w", {3, 4}, a.data()}, {"b", {4}, b.data()}}, {{"format", "pt"}});
       },
       {"m.safetensors"},
       read_safetensors},
      {"train_state.json",
       [](const fs::path &dir) {
         megart::TrainState s;
         s.iteration = s.optimizer_steps = 10;
         s.consumed_samples = 80;
         s.loss_scaler = megart::LossScalerState{65536, 3, 2};
         megart::TrainFlags flags; // as resolve_train_flags leaves them
         flags.lr = 1e-3;
         flags.lr_decay_iters = flags.train_iters = 100;
         flags.micro_batch_size = flags.global_batch_size = 8;
         flags.fp16 = true; // the loss scaler's run
         s.args_json = megart::format_train_args(flags);
         std::ofstream(dir / "train_state.json") << megart::format_train_state(s);
       },
       {"train_state.json"},
       [](const fs::path &dir) { megart::read_train_state((dir / "train_state.json").string()); }},
      {"tracker",
       [](const fs::path &dir) { std::ofstream(dir / "latest_checkpointed_iteration.txt") << "10"; },
       {"latest_checkpointed_iteration.txt"},
       [](const fs::path &dir) { megart::read_tracker(dir.string()); }},
  };
}

} // namespace

int main(int argc, char **argv) {
  const long rounds = argc > 1 ? std::atol(argv[1]) : 2000;
  const unsigned long long seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 20261125;
  const fs::path dir = fs::temp_directory_path() / ("megart-fuzz-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  int failed_targets = 0, passed_targets = 0;
  for (const Target &t : targets()) {
    int failures = 0;
    fs::remove_all(dir);
    fs::create_directories(dir);
    t.make_good(dir);
    std::vector<Bytes> good;
    for (const std::string &f : t.files)
      good.push_back(read_file(dir / f));
    t.read(dir); // the undamaged file must read
    std::mt19937_64 rng(seed);
    long refused = 0, accepted = 0;
    for (long r = 0; r < rounds; ++r) {
      const size_t which = rng() % t.files.size();
      for (size_t i = 0; i < t.files.size(); ++i)
        write_file(dir / t.files[i], i == which ? damage(good[i], rng) : good[i]);
      try {
        t.read(dir);
        ++accepted;
      } catch (const megart::Error &) {
        ++refused;
      } catch (const std::exception &e) {
        std::printf("FAIL %s round %ld: %s escaped instead of a megart::Error: %s\n", t.name, r,
                    typeid(e).name(), e.what());
        ++failures;
      }
    }
    std::printf("%s: %ld damaged inputs, %ld refused with an error, %ld read (harmless damage)\n",
                t.name, rounds, refused, accepted);
    (failures ? failed_targets : passed_targets) += 1;
  }
  fs::remove_all(dir);
  std::printf("%d passed, %d failed\n", passed_targets, failed_targets);
  return failed_targets ? 1 : 0;
}
