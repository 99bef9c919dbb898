#include "frontend/run.h"

#include <cstdio>

#include "frontend/device_program.h"

namespace morgana::frontend {

RunResult run_bundle(const RunOptions& o) {
  RunResult res;
  auto line = [&](const std::string& s) { res.report += s + "\n"; };
  std::unique_ptr<DeviceProgram> p = DeviceProgram::open_file(o.bundle_path, o.program, o.device, o.seed);
  line(p->device_line());
  line(p->program_line());
  if (o.check) {
    CheckResult c = p->check();
    for (const std::string& l : c.lines) line(l);
    res.pass = c.pass;
  } else {
    p->launch_once();
  }
  if (o.iterations > 0) {
    Timing t = p->time_launches(o.warmup, o.iterations);
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "time: median %.1f us, min %.1f us over %d launches (events around each launch, same inputs: "
                  "L2-warm)",
                  t.median_us, t.min_us, t.samples);
    line(buf);
  }
  return res;
}

}  // namespace morgana::frontend
