#include "megac/Plan/ParallelPlan.h"
#include "megart/grid_layout.h"

using namespace megac;

std::string ParallelPlan::summary() const {
  std::string text = "pp " + std::to_string(pp);
  if (vpp > 1)
    text += " vpp " + std::to_string(vpp);
  text += " dp " + std::to_string(dp) + " tp " + std::to_string(tp) + (sp ? " sp" : "");
  if (pp > 1)
    text += " (" + pipelineSchedule + ", " + std::to_string(numMicrobatches) + " microbatches)";
  return text;
}

std::string ParallelPlan::rankLayout() const {
  megart::GridShape shape;
  shape.pp = pp, shape.dp = dp, shape.tp = tp;
  return megart::format_rank_layout(shape);
}
