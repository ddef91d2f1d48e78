#include "megart/stacked_tensors.h"

#include "megart/error.h"

namespace megart {

bool is_stacked(const std::string &name) { return name.find('*') != std::string::npos; }

std::string member_name(const std::string &name, int64_t index) {
  const size_t star = name.find('*');
  return name.substr(0, star) + std::to_string(index) + name.substr(star + 1);
}

bool is_member(const std::string &name, const std::string &stacked) {
  const size_t star = stacked.find('*');
  if (star == std::string::npos || name.size() <= stacked.size() - 1)
    return false;
  const size_t tail = stacked.size() - star - 1, digits = name.size() - star - tail;
  if (name.compare(0, star, stacked, 0, star) != 0 || name.compare(name.size() - tail, tail, stacked, star + 1) != 0)
    return false;
  for (size_t i = star; i < star + digits; ++i)
    if (name[i] < '0' || name[i] > '9')
      return false;
  return true;
}

std::vector<NamedTensor> unstacked(const std::vector<NamedTensor> &tensors) {
  std::vector<NamedTensor> out;
  for (const NamedTensor &t : tensors) {
    if (!is_stacked(t.name)) {
      out.push_back(t);
      continue;
    }
    if (t.shape.size() < 2)
      throw Error("tensor '" + t.name + "' is stacked (`*` in its name) but has rank " +
                  std::to_string(t.shape.size()) + "; a stack of tensors has rank 2 or more");
    const std::vector<int64_t> member(t.shape.begin() + 1, t.shape.end());
    int64_t size = 1;
    for (int64_t d : member)
      size *= d;
    for (int64_t i = 0; i < t.shape[0]; ++i)
      out.push_back({member_name(t.name, i), member, t.data ? t.data + i * size : nullptr});
  }
  return out;
}

} // namespace megart
