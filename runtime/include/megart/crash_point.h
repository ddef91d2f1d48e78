// Named points where a test can make the process die as SIGKILL would, to check that work is
// never lost whatever the moment: MEGART_CRASH_AT=NAME kills the process the first time it
// reaches crash_point("NAME"); with MEGART_CRASH_SIGNAL=TERM (or INT) it sends itself that stop
// signal there instead. Unset (always, outside tests) it costs one getenv per call.
#pragma once

namespace megart {

void crash_point(const char *name);

} // namespace megart
