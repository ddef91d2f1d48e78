// Shared pieces of the MPI tests: the world, sub-groups of it, an in-process training run on a
// grid, comparisons of metrics and checkpoints, and a temporary folder every rank of a group
// sees (one checkpoint file written by one rank and read by the others).
#pragma once

#include "megart/comm_mpi.h"
#include "megart/process_grid.h"
#include "megart/safetensors.h"

#include "train_test_util.h"

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace mpi_test {

inline std::unique_ptr<megart::MpiCommunicator> world() { return megart::MpiCommunicator::world(); }

// Consecutive groups of `size` world ranks ({0, 1}, {2, 3} for size 2).
inline std::unique_ptr<megart::MpiCommunicator> group_of(int size) {
  auto w = world();
  return w->split(w->rank() / size, w->rank(), "group of " + std::to_string(size));
}

inline int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Runs train_on_grid on "train" + args, capturing its output.
inline train_test::RunResult run_on(const megart::ProgramDesc &program, megart::ProcessGrid &grid,
                                    const std::vector<std::string> &args) {
  return train_test::run_capturing(
      args, [&](int argc, const char *const *argv, std::ostream &out, std::ostream &err) {
        return megart::train_on_grid(argc, argv, program, grid, out, err);
      });
}

// The single-rank reference of a plan: `program` on this rank alone, run with `args`, which
// write the metrics file `metrics`; its rows.
inline std::vector<megart::JsonValue> run_alone(const megart::ProgramDesc &program,
                                                const std::vector<std::string> &args,
                                                const std::string &metrics) {
  auto grid = megart::ProcessGrid::single();
  train_test::RunResult r = run_on(program, *grid, args);
  EXPECT_EQ(r.code, 0) << r.err;
  return train_test::read_jsonl(metrics);
}

inline std::vector<double> grad_norms(const std::vector<megart::JsonValue> &rows) {
  std::vector<double> out;
  for (const auto &r : rows)
    out.push_back(r.get("grad_norm")->number);
  return out;
}

inline void expect_near(const std::vector<double> &a, const std::vector<double> &b, double tol,
                        const std::string &what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], tol) << what << " at iteration " << i + 1;
}

inline void expect_same_tensors(const std::string &a, const std::string &b, double tol) {
  const auto fa = megart::SafetensorsFile::open(a), fb = megart::SafetensorsFile::open(b);
  ASSERT_EQ(fa.names(), fb.names());
  for (const std::string &name : fa.names()) {
    const auto &info = fa.get(name);
    const std::vector<float> va = fa.read_f32(name, info.shape), vb = fb.read_f32(name, info.shape);
    ASSERT_EQ(va.size(), vb.size()) << name;
    for (size_t i = 0; i < va.size(); ++i)
      if (tol == 0)
        ASSERT_EQ(va[i], vb[i]) << name << "[" << i << "]";
      else
        ASSERT_NEAR(va[i], vb[i], tol) << name << "[" << i << "]";
  }
}

// rank 0 of the group creates it; the others get its name. Removed after every rank is done.
class SharedTempDir {
public:
  explicit SharedTempDir(megart::MpiCommunicator &group) : group_(group) {
    std::vector<float> name(256, 0.0f); // sent as floats: the Communicator moves floats
    if (group.rank() == 0) {
      char tmpl[] = "/tmp/megart-mpi-XXXXXX";
      if (!mkdtemp(tmpl))
        throw std::runtime_error("mkdtemp failed");
      for (size_t i = 0; tmpl[i]; ++i)
        name[i] = static_cast<float>(tmpl[i]);
    }
    group.broadcast(name.data(), static_cast<int64_t>(name.size()), 0);
    for (float c : name)
      if (c != 0)
        path_ += static_cast<char>(c);
  }
  ~SharedTempDir() {
    group_.barrier();
    if (group_.rank() == 0)
      std::filesystem::remove_all(path_);
  }
  std::string operator/(const std::string &name) const { return path_ + "/" + name; }

private:
  megart::MpiCommunicator &group_;
  std::string path_;
};

} // namespace mpi_test
