// One program of a bundle on this machine's GPU, through the runtime's C API (the one a user embeds): seeded
// random inputs uploaded, outputs and workspace poisoned, a launch checked against the CPU reference
// interpreter, and two ways to time it. `morgana run` and `morgana optimize --measure` are both built on it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace morgana::frontend {

struct CheckResult {
  bool pass = true;                // every output within its dtype's tolerance
  double worst = 0;                // the largest error, as a fraction of the tolerance (> 1: outside)
  std::vector<std::string> lines;  // one per output, then the verdict
};

struct Timing {
  double median_us = 0, min_us = 0;
  int samples = 0;  // launches or replays timed
  int sets = 1;     // input sets one replay goes through
};

class DeviceProgram {
 public:
  // Opens a bundle file or bundle bytes, picks the program (empty: the bundle's only one), makes device
  // `device`'s primary context current and loads the program's code for it. Throws morgana::UserError with
  // the runtime's message when there is no driver, no GPU, no such program or no code for this GPU.
  static std::unique_ptr<DeviceProgram> open_file(const std::string& path, const std::string& program,
                                                  int device, uint64_t seed);
  static std::unique_ptr<DeviceProgram> open_bytes(const std::vector<uint8_t>& bundle,
                                                   const std::string& program, int device, uint64_t seed);
  ~DeviceProgram();
  DeviceProgram(const DeviceProgram&) = delete;
  DeviceProgram& operator=(const DeviceProgram&) = delete;

  // "device 0: NVIDIA H100 80GB HBM3 (sm_90, 132 SMs), driver 13.0" and "program attn: 2 kernel(s), ...".
  std::string device_line() const;
  std::string program_line() const;
  std::string device_name() const;

  // One launch on the seeded inputs, waited for.
  void launch_once();
  // One launch on the seeded inputs, every output compared with the CPU reference (device precision).
  CheckResult check();
  // Events around each of `iterations` launches on the same inputs (L2-warm), after `warmup` launches.
  Timing time_launches(int warmup, int iterations);
  // The bench's protocol (bench/README.md): as many input sets as make their bytes exceed twice the L2 cache,
  // each with its own outputs; one CUDA graph holds one launch per set; `warmup` replays, then `replays`
  // timed ones (events around each); time per launch = replay time / sets. Needs a driver with CUDA graphs.
  Timing time_replays(int warmup, int replays);

  struct State;  // opaque: the bundle, the device buffers, the reference inputs

 private:
  explicit DeviceProgram(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace morgana::frontend
