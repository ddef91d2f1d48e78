// Starts as a training program does (adopt_cpu_thread_defaults first: it restarts the process
// once with OMP_WAIT_POLICY=passive) and prints what it then runs with, for the
// runtime-threads-restart test, which runs it under valgrind where that is installed.
#include "megart/cpu_threads.h"

#include <cstdio>
#include <cstdlib>

int main(int argc, char **argv) {
  megart::adopt_cpu_thread_defaults();
  const char *policy = std::getenv("OMP_WAIT_POLICY");
  std::printf("OMP_WAIT_POLICY=%s, %d arguments, %s\n", policy ? policy : "(unset)", argc - 1,
              megart::describe_cpu_threads().line.c_str());
  return argc > 1 ? std::atoi(argv[1]) : 0;
}
