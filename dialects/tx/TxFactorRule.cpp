#include "tx/TxFactorRule.h"

#include "mlir/IR/BuiltinTypes.h"

#include <numeric>
#include <optional>

using namespace mlir;

namespace megac::tx {

int64_t FactorRule::addFactor(int64_t size, bool needReplication) {
  factorSizes.push_back(size);
  needsReplication.push_back(needReplication);
  return static_cast<int64_t>(factorSizes.size()) - 1;
}

bool FactorRule::resultHas(unsigned r, int64_t f) const {
  return llvm::any_of(results[r], [&](const Dim &d) { return llvm::is_contained(d, f); });
}

llvm::SmallVector<int64_t, 2> FactorRule::factorsOfAxes(const Dim &dim, llvm::ArrayRef<int64_t> axisSizes) const {
  llvm::SmallVector<int64_t, 2> chosen;
  llvm::SmallVector<int64_t, 2> left; // each factor's size not yet split
  for (int64_t f : dim)
    left.push_back(factorSizes[f]);
  size_t at = 0; // the factor the previous axis split
  for (auto [k, size] : llvm::enumerate(axisSizes)) {
    std::optional<size_t> pick;
    for (size_t i = k == 0 ? 0 : at + 1; i < dim.size() && !pick; ++i)
      if (left[i] % size == 0)
        pick = i;
    if (!pick && k > 0 && left[at] % size == 0)
      pick = at;
    if (!pick)
      return {};
    left[*pick] /= size;
    at = *pick;
    chosen.push_back(dim[at]);
  }
  return chosen;
}

llvm::SmallVector<int64_t> FactorRule::reductionFactors() const {
  llvm::SmallVector<int64_t> found;
  if (results.empty()) // a sink (a parameter's gradient): nothing to be partial
    return found;
  for (int64_t f = 0; f < static_cast<int64_t>(factorSizes.size()); ++f)
    if (!needsReplication[f] &&
        llvm::none_of(llvm::seq<unsigned>(0, results.size()), [&](unsigned r) { return resultHas(r, f); }))
      found.push_back(f);
  return found;
}

namespace {

/// i, j, ..., z, then z1, z2, ... (Shardy's names).
std::string factorName(int64_t f) {
  constexpr int64_t kLetters = 'z' - 'i' + 1;
  return f < kLetters ? std::string(1, char('i' + f)) : "z" + std::to_string(f - kLetters + 1);
}

void printTensors(llvm::raw_ostream &os, llvm::ArrayRef<FactorRule::Tensor> tensors) {
  os << "(";
  llvm::interleaveComma(tensors, os, [&](const FactorRule::Tensor &t) {
    os << "[";
    llvm::interleaveComma(t, os, [&](const FactorRule::Dim &d) {
      if (d.empty())
        os << "1";
      else if (d.size() == 1)
        os << factorName(d[0]);
      else {
        os << "(";
        llvm::interleaveComma(d, os, [&](int64_t f) { os << factorName(f); });
        os << ")";
      }
    });
    os << "]";
  });
  os << ")";
}

void printFactorSet(llvm::raw_ostream &os, llvm::StringRef label, llvm::ArrayRef<int64_t> factors) {
  if (factors.empty())
    return;
  os << " " << label << "={";
  llvm::interleaveComma(factors, os, [&](int64_t f) { os << factorName(f); });
  os << "}";
}

ArrayRef<int64_t> shapeOf(Value v) { return cast<ShapedType>(v.getType()).getShape(); }

} // namespace

void FactorRule::print(llvm::raw_ostream &os) const {
  printTensors(os, operands);
  os << " -> ";
  printTensors(os, results);
  os << " {";
  llvm::interleaveComma(llvm::seq<int64_t>(0, factorSizes.size()), os,
                        [&](int64_t f) { os << factorName(f) << "=" << factorSizes[f]; });
  os << "}";
  printFactorSet(os, "reduction", reductionFactors());
  llvm::SmallVector<int64_t> replicated;
  for (int64_t f = 0; f < static_cast<int64_t>(factorSizes.size()); ++f)
    if (needsReplication[f])
      replicated.push_back(f);
  printFactorSet(os, "need_replication", replicated);
}

FactorRule::Tensor freshFactors(FactorRule &rule, ArrayRef<int64_t> shape) {
  FactorRule::Tensor t;
  for (int64_t size : shape)
    t.push_back(size == 1 ? FactorRule::Dim{} : FactorRule::Dim{rule.addFactor(size)});
  return t;
}

FactorRule elementwiseRule(Operation *op) {
  FactorRule rule;
  const FactorRule::Tensor first = freshFactors(rule, shapeOf(op->getOperand(0)));
  auto aligned = [&](Value v) {
    const size_t rank = shapeOf(v).size();
    return FactorRule::Tensor(first.end() - std::min(rank, first.size()), first.end());
  };
  for (Value v : op->getOperands())
    rule.operands.push_back(aligned(v));
  for (Value v : op->getResults())
    rule.results.push_back(aligned(v));
  return rule;
}

FactorRule reshapeRule(ArrayRef<int64_t> in, ArrayRef<int64_t> out) {
  FactorRule rule;
  if (llvm::is_contained(in, 0) || llvm::is_contained(out, 0)) { // nothing to split
    rule.operands = {FactorRule::Tensor(in.size())};
    rule.results = {FactorRule::Tensor(out.size())};
    return rule;
  }
  FactorRule::Tensor a(in.size()), b(out.size());
  size_t i = 0, j = 0;
  auto skipOnes = [&] {
    while (i < in.size() && in[i] == 1)
      ++i;
    while (j < out.size() && out[j] == 1)
      ++j;
  };
  skipOnes();
  int64_t ra = i < in.size() ? in[i] : 1, rb = j < out.size() ? out[j] : 1;
  while (i < in.size() && j < out.size()) {
    if (ra % rb != 0 && rb % ra != 0) {
      // No common refinement here: the dimensions up to where the products meet again are one
      // factor that cannot be split.
      int64_t pa = ra, pb = rb;
      llvm::SmallVector<size_t> ia = {i}, jb = {j};
      while (pa != pb && (i + 1 < in.size() || j + 1 < out.size())) {
        if (pa < pb && i + 1 < in.size())
          pa *= in[++i], ia.push_back(i);
        else if (j + 1 < out.size())
          pb *= out[++j], jb.push_back(j);
        else
          break;
      }
      const int64_t f = rule.addFactor(std::max(pa, pb), /*needReplication=*/true);
      for (size_t x : ia)
        a[x].push_back(f);
      for (size_t x : jb)
        b[x].push_back(f);
      ++i, ++j;
      skipOnes();
      ra = i < in.size() ? in[i] : 1, rb = j < out.size() ? out[j] : 1;
      continue;
    }
    const int64_t size = std::min(ra, rb);
    const int64_t f = rule.addFactor(size);
    a[i].push_back(f);
    b[j].push_back(f);
    ra /= size, rb /= size;
    if (ra == 1)
      ++i;
    if (rb == 1)
      ++j;
    skipOnes();
    if (ra == 1)
      ra = i < in.size() ? in[i] : 1;
    if (rb == 1)
      rb = j < out.size() ? out[j] : 1;
  }
  rule.operands.push_back(std::move(a));
  rule.results.push_back(std::move(b));
  return rule;
}

} // namespace megac::tx
