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
  // Expert parallelism inside dp (Megatron's expert rank order): dp rank d is ep rank d % ep of the
  // group of ep consecutive dp ranks that split the experts; ep divides dp and adds no ranks.
  int64_t ep = 1;
  int64_t world() const { return pp * dp * tp; }
  // "pp 1 x dp 2 x tp 2 = 4 ranks" (", ep 2 inside dp" with expert parallelism)
  std::string describe() const {
    return "pp " + std::to_string(pp) + " x dp " + std::to_string(dp) + " x tp " + std::to_string(tp) + " = " +
           std::to_string(world()) + " rank" + (world() == 1 ? "" : "s") +
           (ep > 1 ? ", ep " + std::to_string(ep) + " inside dp" : "");
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

// What --rank-layout prints: one line per global rank with its (pp, dp, tp) coordinates, and with
// expert parallelism its ep rank (dp_rank % ep) and expert-data-parallel rank (dp_rank / ep).
inline std::string format_rank_layout(const GridShape &s) {
  const bool experts = s.ep > 1;
  std::string text = "rank layout: " + s.describe() + " (global rank = tp_rank + tp * (dp_rank + dp * pp_rank)" +
                     (experts ? "; ep_rank = dp_rank % ep, expert_dp_rank = dp_rank / ep" : "") + ")\n" +
                     "  global rank    pp    dp    tp" + (experts ? "    ep  expert_dp" : "") + "\n";
  char line[160]; // room for six 19-digit numbers: GCC checks the worst case
  for (int64_t g = 0; g < s.world(); ++g) {
    const GridCoord c = grid_coord_of(s, g);
    std::snprintf(line, sizeof line, "  %11lld %5lld %5lld %5lld", static_cast<long long>(g),
                  static_cast<long long>(c.pp), static_cast<long long>(c.dp), static_cast<long long>(c.tp));
    text += line;
    if (experts) {
      std::snprintf(line, sizeof line, " %5lld %10lld", static_cast<long long>(c.dp % s.ep),
                    static_cast<long long>(c.dp / s.ep));
      text += line;
    }
    text += "\n";
  }
  return text;
}

} // namespace megart
