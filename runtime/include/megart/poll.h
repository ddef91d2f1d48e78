// The pacing of every wait with a time limit (MPI requests, NCCL calls, the GPU's stream): the
// core is yielded for the first milliseconds, which lets a transfer progress at full speed (each
// poll moves it on), then the waiter sleeps between polls, so that a rank waiting long (a
// pipeline bubble, a slow peer) does not take the core from the rank it waits for when ranks
// are oversubscribed on few cores.
#pragma once

#include <chrono>
#include <string>

namespace megart {

class Poll {
public:
  explicit Poll(double timeout_seconds);
  // Whether the time limit has passed.
  bool expired() const;
  // Between two polls of something not done yet.
  void pause() const;
  // Seconds since the wait began.
  double elapsed() const;

private:
  std::chrono::steady_clock::time_point started_, stop_yielding_, deadline_;
};

// A timeout for messages: "10", "0.5", "600".
std::string seconds_text(double seconds);

} // namespace megart
