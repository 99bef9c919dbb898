// Fuzz target: a spec or μGraph file, through everything `morgana check`, `fmt`, `eval` and `verify` do with it.
// Any input may be refused with a UserError (a located message); what is accepted must also:
//   - print in canonical form and parse back to the same text (`morgana fmt` is a fixed point);
//   - get a cost estimate on a real target without a fault (the cost model takes any verified graph);
//   - when small enough to interpret, evaluate, and be equivalent to itself in the full and in the sampled exact
//     check (the interpreters agree with themselves and with each other), and pass through the float check.
// Anything else (a crash, a sanitizer report, an InternalError or other exception, a broken property) is a finding.
#include <cstdint>
#include <string>

#include "frontend/report.h"
#include "ir/diagnostic.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "search/cost_model.h"
#include "targets/target.h"
#include "tests/fuzz/fuzz_support.h"
#include "verify/equivalence.h"
#include "verify/float_check.h"

namespace {

using namespace morgana;

const targets::Target& h100() {
  static const targets::Target t = targets::find_target("h100", fuzz::source_targets_dir());
  return t;
}

void check_program(const ir::Graph& g) {
  const std::string printed = ir::print(g);
  ir::Module again;
  try {
    again = ir::parse_module(printed, "printed");
  } catch (const UserError& e) {
    fuzz::finding("the canonical form of an accepted program does not parse: " + e.render() + "\n" + printed);
  }
  if (again.programs.size() != 1 || ir::print(again.programs[0]) != printed)
    fuzz::finding("the canonical form does not print back the same:\n" + printed);

  (void)search::estimate(g, h100());

  if (!fuzz::small_enough_to_interpret(g)) return;
  frontend::EvalOptions eo;
  ir::Module one;
  one.programs.push_back(g);
  (void)frontend::eval_report(one, eo);
  for (bool full : {true, false}) {
    verify::Verdict v = verify::equivalent(g, g, {.trials = 1, .seed = 7, .full = full});
    if (v.kind == verify::Verdict::Different || v.kind == verify::Verdict::InterfaceMismatch)
      fuzz::finding(std::string("a program is not equivalent to itself (") + (full ? "full" : "sampled") +
                    " check): " + v.str() + "\n" + printed);
  }
  (void)verify::float_check(g, g, {});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ir::Module m;
  try {
    m = ir::parse_module(fuzz::as_text(data, size), "fuzzed.mg");
  } catch (const UserError&) {
    return 0;  // refused with a location and a message: what bad input must get
  }
  (void)frontend::check_report(m);
  for (const ir::Graph& g : m.programs) {
    try {
      check_program(g);
    } catch (const UserError&) {
      // A limit named at a boundary (a program the cost model or an interpreter refuses) is an answer too.
    }
  }
  return 0;
}
