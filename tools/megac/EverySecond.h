// The pacing of progress lines: quiet for runs shorter than two seconds, then at most one line
// a second.
#pragma once

#include <chrono>

namespace megac {

class EverySecond {
public:
  EverySecond() : start_(Clock::now()), last_(start_) {}
  // Whether a progress line is due now (and, if so, the next one in a second).
  bool due() {
    const Clock::time_point now = Clock::now();
    if (seconds(now - last_) < 1.0 || seconds(now - start_) < 2.0)
      return false;
    last_ = now;
    return true;
  }
  double elapsed() const { return seconds(Clock::now() - start_); }

private:
  using Clock = std::chrono::steady_clock;
  static double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
  Clock::time_point start_, last_;
};

} // namespace megac
