#include "megart/poll.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <sched.h>

namespace megart {

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point after(double seconds) {
  // Capped at about three years: a longer wait in nanoseconds would overflow the clock.
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::min(seconds, 1e8)));
}

} // namespace

Poll::Poll(double timeout_seconds)
    : started_(Clock::now()), stop_yielding_(after(5e-3)), deadline_(after(timeout_seconds)) {}

double Poll::elapsed() const { return std::chrono::duration<double>(Clock::now() - started_).count(); }

bool Poll::expired() const { return Clock::now() >= deadline_; }

void Poll::pause() const {
  if (Clock::now() < stop_yielding_) {
    sched_yield();
  } else {
    timespec pause{0, 50'000};
    nanosleep(&pause, nullptr);
  }
}

std::string seconds_text(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", seconds);
  return buf;
}

} // namespace megart
