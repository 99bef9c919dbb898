// Developer tool (not a test): lowers a spec file for a target and prints the tiled μGraph and the kernel IR, or
// with a third argument `cuda`, the generated CUDA source; `spill` allows spilling tiles to global memory.
#include <iostream>

#include "ir/parser.h"
#include "ir/printer.h"
#include "targets/cuda/codegen.h"
#include "targets/lower/lower.h"

int main(int argc, char** argv) {
  using namespace morgana;
  if (argc < 3) {
    std::cerr << "usage: lower_dump FILE.mg TARGET.toml [cuda|spill|cuda-spill]\n";
    return 2;
  }
  try {
    targets::Target t = targets::load_target(argv[2], "/");  // a developer's own file: its bases anywhere
    for (const ir::Graph& g : ir::parse_file(argv[1]).programs) {
      lower::LowerOptions o;
      std::string mode = argc > 3 ? argv[3] : "";
      o.spill_to_global = mode.find("spill") != std::string::npos;
      if (mode.starts_with("cuda")) {
        std::cout << cuda::emit_cuda(cuda::lower(g, t, o), t).text;
        continue;
      }
      lower::TiledGraph tiled = lower::tile_kernel_ops(g, t);
      std::cout << ir::print(tiled.graph) << "\n";
      std::cout << lower::print(lower::lower(g, t, o)) << "\n";
    }
  } catch (const UserError& e) {
    std::cerr << e.render() << "\n";
    return 1;
  }
}
