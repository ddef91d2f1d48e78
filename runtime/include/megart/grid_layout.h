// Megatron's rank order for a pp x dp x tp grid: tp fastest, then dp, then pp (slowest),
//   global rank = tp_rank + tp * (dp_rank + dp * pp_rank),
// so the ranks of one tensor-parallel group are neighbours (one node). Header-only and free of
// MLIR and exceptions: the compiler (megac compile --rank-layout, the comment header of generated
// code) and the runtime (which communicator joins which ranks) share this one definition.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace megart {

// The axes in rank order, slowest first: pp, dp, tp (the compiler's @grid has this order too).
struct GridShape {
  int64_t pp = 1, dp = 1, tp = 1;
  int64_t world() const { return pp * dp * tp; }
  // "pp 1 x dp 2 x tp 2 = 4 ranks"
  std::string describe() const {
    return "pp " + std::to_string(pp) + " x dp " + std::to_string(dp) + " x tp " + std::to_string(tp) + " = " +
           std::to_string(world()) + " rank" + (world() == 1 ? "" : "s");
  }
};

struct GridCoord {
  int64_t pp = 0, dp = 0, tp = 0;
};

inline int64_t global_rank_of(const GridShape &s, const GridCoord &c) { return c.tp + s.tp * (c.dp + s.dp * c.pp); }

// `global_rank` must be in [0, s.world()).
inline GridCoord grid_coord_of(const GridShape &s, int64_t global_rank) {
  GridCoord c;
  c.tp = global_rank % s.tp;
  c.dp = (global_rank / s.tp) % s.dp;
  c.pp = global_rank / (s.tp * s.dp);
  return c;
}

// What --rank-layout prints: one line per global rank with its (pp, dp, tp) coordinates.
inline std::string format_rank_layout(const GridShape &s) {
  std::string text = "rank layout: " + s.describe() +
                     " (global rank = tp_rank + tp * (dp_rank + dp * pp_rank))\n"
                     "  global rank    pp    dp    tp\n";
  char line[96]; // room for four 19-digit numbers: GCC checks the worst case
  for (int64_t g = 0; g < s.world(); ++g) {
    const GridCoord c = grid_coord_of(s, g);
    std::snprintf(line, sizeof line, "  %11lld %5lld %5lld %5lld\n", static_cast<long long>(g),
                  static_cast<long long>(c.pp), static_cast<long long>(c.dp), static_cast<long long>(c.tp));
    text += line;
  }
  return text;
}

} // namespace megart
