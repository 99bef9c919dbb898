// The generator's pruning rules and the shape of its space, each on its own (search/gen_rules.h,
// search/gen_space.h): a partial-result state in, the rule's verdict and the next state out.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "search/gen_rules.h"
#include "search/gen_space.h"

namespace morgana::search::gen {
namespace {

// Axes of a small attention: rows (1), keys (2), head dim (3).
constexpr uint16_t kRows = 1, kKeys = 2, kHead = 3;
Label axis(uint16_t a) { return Label{a, 0, 0}; }
Labels labels(std::initializer_list<Label> dims) {
  Labels l;
  for (const Label& d : dims) l.dims[l.rank++] = d;
  return l;
}
BTensor value(Labels l) {
  BTensor t;
  t.labels = l;
  return t;
}
// A block whose grid cuts the rows and whose loop walks the keys (bits: rows 0, keys 1).
Skeleton flash_skeleton() { return Skeleton{{0, 1, 2}, {axis(kRows)}, axis(kKeys)}; }
SpecAxes spec_axes() {
  SpecAxes a;
  a.extent = {1, 64, 4096, 128};
  return a;
}

TEST(GenRules, AConstantGoesRightBeforeWhatDoesNotCommuteWithIt) {
  EXPECT_TRUE(scalar_consumer_ok(OpCode::input, OpCode::matmul, false)) << "not a scalar's result";
  EXPECT_TRUE(scalar_consumer_ok(OpCode::mul_scalar, OpCode::exp, false)) << "a non-linear op";
  EXPECT_FALSE(scalar_consumer_ok(OpCode::mul_scalar, OpCode::matmul, false)) << "a factor commutes with a product";
  EXPECT_FALSE(scalar_consumer_ok(OpCode::mul_scalar, OpCode::acc_sum, false));
  EXPECT_TRUE(scalar_consumer_ok(OpCode::mul_scalar, OpCode::add_scalar, false)) << "x·a + b";
  EXPECT_FALSE(scalar_consumer_ok(OpCode::add_scalar, OpCode::mul_scalar, false)) << "(x + b)·a is not canonical";
  EXPECT_TRUE(scalar_consumer_ok(OpCode::mul_scalar, OpCode::reduce_max, false)) << "a softmax's max";
  EXPECT_FALSE(scalar_consumer_ok(OpCode::mul_scalar, OpCode::save, false));
  EXPECT_TRUE(scalar_consumer_ok(OpCode::mul_scalar, OpCode::save, true)) << "the spec scales its output";
  EXPECT_TRUE(scalar_operands_ok(OpCode::sub, OpCode::mul_scalar, OpCode::input, true, false)) << "s·x - max";
  EXPECT_FALSE(scalar_operands_ok(OpCode::sub, OpCode::mul_scalar, OpCode::input, false, false));
  EXPECT_FALSE(scalar_operands_ok(OpCode::sub, OpCode::input, OpCode::mul_scalar, true, false)) << "the max itself";
}

TEST(GenRules, AMaxOnlyStabilisesAnExpTheSpecHas) {
  int asked = 0;
  auto yes = [&] { return ++asked, true; };
  auto no = [&] { return ++asked, false; };
  EXPECT_EQ(shift_rule(OpCode::add, false, false, false, true, no), nullptr);
  EXPECT_EQ(asked, 0) << "the e-graph is asked only where its answer decides";
  EXPECT_EQ(shift_rule(OpCode::sub, false, true, false, true, yes), nullptr) << "x - max, exp(x) in the spec";
  EXPECT_STREQ(shift_rule(OpCode::sub, false, true, false, true, no), prune::shift) << "exp(x) not in the spec";
  EXPECT_STREQ(shift_rule(OpCode::add, false, true, false, true, yes), prune::shift) << "x + max";
  EXPECT_STREQ(shift_rule(OpCode::sub, true, false, false, true, yes), prune::shift) << "max - x";
  EXPECT_STREQ(shift_rule(OpCode::exp, true, false, false, true, yes), prune::shift) << "exp(max)";
  EXPECT_STREQ(shift_rule(OpCode::reduce_max, false, false, false, true, no), prune::shift);
  EXPECT_EQ(shift_rule(OpCode::reduce_max, false, false, false, true, yes), nullptr);
  EXPECT_STREQ(shift_rule(OpCode::exp, false, false, false, true, yes), prune::unsafe) << "exp of raw logits";
  EXPECT_EQ(shift_rule(OpCode::exp, false, false, true, true, yes), nullptr) << "exp(x - max)";
  EXPECT_EQ(shift_rule(OpCode::exp, false, false, false, false, yes), nullptr) << "the spec's exp is not a softmax's";
}

TEST(GenRules, OnlyAxesTheSpecReducesAreReduced) {
  const std::vector<uint16_t> reduced{kKeys, kHead};
  EXPECT_TRUE(spec_reduces(axis(kKeys), reduced));
  EXPECT_FALSE(spec_reduces(axis(kRows), reduced));
  EXPECT_TRUE(spec_reduces(Label{}, reduced)) << "a unit dim";
  EXPECT_TRUE(spec_reduces(Label{kHead, kKeys, 8}, reduced)) << "stacked partial results";
}

TEST(GenRules, AConcatJoinsTwoAxesAndIsOnlyContracted) {
  constexpr uint16_t kRank = 4, kJoined = 5;  // LoRA: the rank axis, and K‖R
  const Label joint = axis(kJoined);
  JoinedAxes joined;
  joined.list.push_back({kHead, kRank, kJoined});
  const Labels x = labels({axis(kRows), axis(kHead)}), xa = labels({axis(kRows), axis(kRank)});
  const std::optional<Labels> xxa = concat_labels(x, xa, 1, joined);
  ASSERT_TRUE(xxa.has_value());
  EXPECT_EQ(*xxa, labels({axis(kRows), joint}));
  EXPECT_EQ(block_labels(OpCode::concat, ir::Attrs{.dim = 1}, &x, &xa, joined, nullptr), xxa) << "the same rule";
  EXPECT_FALSE(concat_labels(xa, x, 1, joined)) << "each order is a joint of its own: (R, K) is not joined here";
  EXPECT_FALSE(concat_labels(x, labels({axis(kKeys), axis(kRank)}), 1, joined)) << "the rows disagree";
  EXPECT_FALSE(concat_labels(x, labels({axis(kRank)}), 0, joined)) << "ranks differ";
  Label reduced;
  EXPECT_EQ(block_labels(OpCode::matmul, ir::Attrs{}, &x, &xa, joined, &reduced), std::nullopt)
      << "any other op by infer_labels: the head dim against the rows";
  EXPECT_EQ(joint_rule(OpCode::matmul, false, false, false), nullptr);
  EXPECT_EQ(joint_rule(OpCode::matmul, true, true, true), nullptr) << "(X‖XA)·(W;B) over K‖R";
  EXPECT_STREQ(joint_rule(OpCode::matmul, true, false, false), prune::concat) << "over another axis";
  EXPECT_STREQ(joint_rule(OpCode::exp, true, false, false), prune::concat);
  EXPECT_STREQ(joint_rule(OpCode::add, false, true, false), prune::concat);
  EXPECT_EQ(joined.of(axis(kHead), axis(kRank)), joint);
  EXPECT_FALSE(joined.of(axis(kRank), axis(kHead))) << "each order is a joint of its own";
  EXPECT_TRUE(joined.any_joint(*xxa));
  EXPECT_FALSE(joined.any_joint(labels({axis(kRows), axis(kHead)})));
}

TEST(GenRules, AConcatJoinsWholeValuesOnly) {
  const Header h = header_of(flash_skeleton());
  BTensor x = value(labels({axis(kRows), axis(kHead)}));
  BTensor p = x;
  p.psum = 0b10;
  BTensor t;
  EXPECT_EQ(partial_state(OpCode::concat, x, &x, -1, h, t), nullptr);
  EXPECT_STREQ(partial_state(OpCode::concat, x, &p, -1, h, t), prune::partial);
}

TEST(GenRules, AKernelPrefixNeedsRoomForItsOpenTensors) {
  EXPECT_EQ(kernel_prefix_rule(5, 0, 1, 1, 12), nullptr) << "one more block op reads four, one is the output";
  EXPECT_STREQ(kernel_prefix_rule(6, 0, 1, 1, 12), prune::dead_end);
  EXPECT_EQ(kernel_prefix_rule(1, 12, 1, 1, 12), nullptr);
  EXPECT_STREQ(kernel_prefix_rule(1, 13, 1, 1, 12), prune::distance) << "further than one block graph's ops";
  EXPECT_STREQ(kernel_prefix_rule(1, 2, 1, 1, 0), prune::distance) << "a block takes at least one step";
}

TEST(GenRules, APartialSumIsOnlyScaledSummedLikeItselfAndMultipliedByConstants) {
  const Header h = header_of(flash_skeleton());  // rows: bit 0, keys: bit 1
  ASSERT_EQ(h.bit(axis(kKeys)), 1);
  BTensor p = value(labels({axis(kRows), axis(kHead)}));
  p.psum = 0b10;  // a sum over this iteration's keys
  BTensor t;
  EXPECT_STREQ(partial_state(OpCode::exp, p, nullptr, -1, h, t), prune::partial) << "non-linear";
  t = {};
  EXPECT_EQ(partial_state(OpCode::mul_scalar, p, nullptr, -1, h, t), nullptr);
  EXPECT_EQ(t.psum, 0b10);
  EXPECT_EQ(t.scalar, OpCode::mul_scalar);
  EXPECT_EQ(t.scalar_chain, 1);
  BTensor whole = value(labels({axis(kRows), axis(kHead)}));
  t = {};
  EXPECT_STREQ(partial_state(OpCode::add, p, &whole, -1, h, t), prune::partial) << "partial + whole";
  t = {};
  EXPECT_EQ(partial_state(OpCode::add, p, &p, -1, h, t), nullptr);
  EXPECT_EQ(t.psum, 0b10);
  t = {};
  EXPECT_EQ(partial_state(OpCode::mul, p, &whole, -1, h, t), nullptr) << "times a value constant along the keys";
  BTensor along_keys = value(labels({axis(kKeys), axis(kHead)}));
  t = {};
  EXPECT_STREQ(partial_state(OpCode::matmul, p, &along_keys, -1, h, t), prune::partial)
      << "times a value that varies along the keys";
  t = {};
  EXPECT_STREQ(partial_state(OpCode::div, whole, &p, -1, h, t), prune::partial) << "divided by a partial sum";
  t = {};
  EXPECT_STREQ(partial_state(OpCode::rms_norm, p, nullptr, -1, h, t), prune::partial);
  BTensor scaled = whole;
  scaled.scalar_chain = kMaxScalarChain;
  t = {};
  EXPECT_STREQ(partial_state(OpCode::add_scalar, scaled, nullptr, -1, h, t), prune::scalar) << "too many constants";
}

TEST(GenRules, AProductOverTheLoopedAxisIsPartialOverIt) {
  const Header h = header_of(flash_skeleton());
  BTensor q = value(labels({axis(kRows), axis(kHead)}));
  BTensor kt = value(labels({axis(kHead), axis(kKeys)}));
  BTensor t;
  EXPECT_EQ(partial_state(OpCode::matmul, q, &kt, -1, h, t), nullptr) << "Q·Kᵀ sums the head dim, no axis of the header";
  EXPECT_EQ(t.psum, 0);
  BTensor p = value(labels({axis(kRows), axis(kKeys)}));
  BTensor v = value(labels({axis(kKeys), axis(kHead)}));
  t = {};
  EXPECT_EQ(partial_state(OpCode::matmul, p, &v, h.bit(axis(kKeys)), h, t), nullptr);
  EXPECT_EQ(t.psum, 0b10) << "P·V sums this iteration's keys";
}

TEST(GenRules, SubtractingAMaxScalesWhatFollowsByIt) {
  const Header h = header_of(flash_skeleton());
  BTensor s = value(labels({axis(kRows), axis(kKeys)}));
  BTensor t;
  ASSERT_EQ(partial_state(OpCode::reduce_max, s, nullptr, 1, h, t), nullptr);
  EXPECT_EQ(t.pmax, 0b10) << "the max of this iteration's keys";
  BTensor m = t;
  m.shift = true;
  t = {};
  ASSERT_EQ(partial_state(OpCode::sub, s, &m, -1, h, t), nullptr);
  EXPECT_TRUE(t.shifted);
  EXPECT_EQ(t.maxdep, 0b10) << "exp(s - m) is scaled by the iteration's max";
  BTensor shifted = t;
  t = {};
  EXPECT_STREQ(partial_state(OpCode::sub, shifted, &m, -1, h, t), prune::shift) << "a second max subtraction";
  t = {};
  EXPECT_STREQ(partial_state(OpCode::reduce_max, shifted, nullptr, 1, h, t), prune::shift);
  // A quotient of two values scaled by the same max cancels the scaling; a product keeps it.
  BTensor e = value(labels({axis(kRows), axis(kKeys)}));
  e.maxdep = 0b10;
  BTensor d = value(labels({axis(kRows), Label{}}));
  d.maxdep = 0b10;
  t = {};
  ASSERT_EQ(partial_state(OpCode::div, e, &d, -1, h, t), nullptr);
  EXPECT_EQ(t.maxdep, 0);
  t = {};
  ASSERT_EQ(partial_state(OpCode::mul, e, &d, -1, h, t), nullptr);
  EXPECT_EQ(t.maxdep, 0b10);
}

TEST(GenRules, ASumOfSquaresOverAWholeAxisIsTheNormsJob) {
  const Header h = header_of(Skeleton{{0}, {axis(kRows)}, Label{}});  // no loop: the head dim is whole
  BTensor sq = value(labels({axis(kRows), axis(kHead)}));
  sq.squared = true;
  BTensor t;
  EXPECT_STREQ(partial_state(OpCode::reduce_sum, sq, nullptr, -1, h, t), prune::norm);
  const Header looped = header_of(Skeleton{{0}, {axis(kRows)}, axis(kHead)});
  t = {};
  EXPECT_EQ(partial_state(OpCode::reduce_sum, sq, nullptr, looped.bit(axis(kHead)), looped, t), nullptr)
      << "a sum over one iteration's part is a partial result to accumulate";
  EXPECT_EQ(t.psum, 1 << looped.bit(axis(kHead)));
}

TEST(GenRules, AValueTheBlockHasIsRedundant) {
  BTensor a = value(labels({axis(kRows), axis(kKeys)}));
  a.expr = 7;
  a.cls = 3;
  BTensor it = a;
  it.iter = true;
  BTensor same = a;
  same.cls = UINT32_MAX;
  EXPECT_TRUE(redundant({a}, same, UINT32_MAX)) << "the same term";
  same.expr = 9;
  EXPECT_TRUE(redundant({a}, same, 3)) << "the same e-class";
  EXPECT_FALSE(redundant({a}, same, 4));
  EXPECT_FALSE(redundant({it}, same, 3)) << "an iterator is an input, not a computed value";
  same.psum = 1;
  EXPECT_FALSE(redundant({a}, same, 3)) << "another partial state";
  same.psum = 0;
  same.epilogue = true;
  EXPECT_FALSE(redundant({a}, same, 3)) << "the epilogue's value is accumulated";
}

TEST(GenRules, AtMostThreeBodyValuesAreOpenAtOnce) {
  Block b;
  for (int i = 0; i < kMaxOpen; ++i) b.bt.push_back(value(labels({axis(kRows)})));
  BTensor iter = value(labels({axis(kRows)}));
  iter.iter = true;
  b.bt.push_back(iter);
  EXPECT_EQ(width_rule(b), nullptr) << "iterators do not count";
  b.bt.push_back(value(labels({axis(kRows)})));
  EXPECT_STREQ(width_rule(b), prune::width);
}

TEST(GenRules, EachOpenValueGetsTheAccumulatorItsPartialStateNeeds) {
  Skeleton sk = flash_skeleton();
  Block b;
  b.sk = &sk;
  b.h = header_of(sk);
  BTensor m = value(labels({axis(kRows), Label{}}));
  m.shift = true;
  m.pmax = 0b10;
  b.bt.push_back(m);  // 0: the iteration's max
  BTensor pv = value(labels({axis(kRows), axis(kHead)}));
  pv.psum = 0b10;
  pv.maxdep = 0b10;  // exp(s - m)·V
  BTensor sum = pv;
  sum.maxdep = 0;
  BTensor row = value(labels({axis(kRows), axis(kKeys)}));  // has the keys as a dim: not a sum over them
  using Choices = std::vector<std::pair<OpCode, TensorId>>;
  EXPECT_EQ(accumulator_choices(b, m, {0}), (Choices{{OpCode::acc_max, 0}}));
  EXPECT_EQ(accumulator_choices(b, pv, {0}), (Choices{{OpCode::acc_rescale_sum, 0}}));
  EXPECT_EQ(accumulator_choices(b, pv, {}), Choices{}) << "no running max to rescale by";
  EXPECT_EQ(accumulator_choices(b, sum, {0}), (Choices{{OpCode::acc_sum, 0}}));
  EXPECT_EQ(accumulator_choices(b, row, {0}), Choices{});
  Skeleton no_loop{{0}, {axis(kRows)}, Label{}};
  b.sk = &no_loop;
  b.h = header_of(no_loop);
  EXPECT_EQ(accumulator_choices(b, row, {}), (Choices{{OpCode::acc_sum, 0}})) << "without a loop, as it is";
}

TEST(GenRules, ALoopThatCompletesItsAxisCompletesThePartialState) {
  BTensor pv = value(labels({axis(kRows), axis(kHead)}));
  pv.psum = 0b10;
  pv.maxdep = 0b10;
  pv.scalar = OpCode::mul_scalar;
  pv.uses = 2;
  BTensor t = accumulated(pv, header_of(flash_skeleton()));
  EXPECT_EQ(t.psum, 0);
  EXPECT_EQ(t.maxdep, 0);
  EXPECT_TRUE(t.epilogue);
  EXPECT_EQ(t.uses, 0);
  EXPECT_EQ(t.scalar, OpCode::input);
  // Split-KV: the grid cuts the keys too, so the block's sum stays partial over its split.
  t = accumulated(pv, header_of(Skeleton{{0, 1, 2}, {axis(kRows), axis(kKeys)}, axis(kKeys)}));
  EXPECT_EQ(t.psum, 0b10);
}

TEST(GenRules, APartialResultIsSavedWithItsMax) {
  Skeleton sk{{0, 1, 2}, {axis(kRows), axis(kKeys)}, axis(kKeys)};
  Block b;
  b.sk = &sk;
  b.h = header_of(sk);
  BTensor o = value(labels({axis(kRows), axis(kHead)}));
  o.epilogue = true;
  o.maxdep = 0b10;
  BTensor m = value(labels({axis(kRows), Label{}}));
  m.epilogue = true;
  m.shift = true;
  m.pmax = 0b10;
  b.bt = {o, m};
  EXPECT_STREQ(saves_rule(b, {0}, 3), prune::shift) << "the rescaled output without its max";
  EXPECT_EQ(saves_rule(b, {0, 1}, 3), nullptr);
  b.final = true;
  EXPECT_STREQ(saves_rule(b, {0, 1}, 1), prune::final) << "a last block op saves exactly the spec's outputs";
  auto never = [] {
    ADD_FAILURE() << "asked the e-graph about a value the state already rules out";
    return true;
  };
  EXPECT_STREQ(save_value_rule(o, true, never), prune::final);
  EXPECT_STREQ(save_value_rule(m, false, never), nullptr) << "a partial max goes to the combine";
  BTensor whole_max = m;
  whole_max.pmax = 0;
  EXPECT_STREQ(save_value_rule(whole_max, false, never), prune::shift);
  BTensor out = value(labels({axis(kRows), axis(kHead)}));
  EXPECT_EQ(save_value_rule(out, true, [] { return true; }), nullptr);
  EXPECT_STREQ(save_value_rule(out, true, [] { return false; }), prune::final);
}

TEST(GenRules, ASaverCutsItsAxisOrStacksThePartsAlongAFreeDim) {
  const SpecAxes axes = spec_axes();
  Skeleton sk{{0, 1, 2}, {axis(kRows), axis(kKeys)}, axis(kKeys)};
  Block b;
  b.sk = &sk;
  b.h = header_of(sk);
  BTensor o = value(labels({axis(kRows), axis(kHead)}));
  o.psum = 0b10;
  std::optional<ir::Attrs> a = saver_map(b, o, axes);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->map[0], 0) << "the grid's rows cut the rows";
  EXPECT_EQ(a->map[1], 1) << "the splits stack along the last free dim";
  BTensor m = value(labels({axis(kRows), Label{}, axis(kHead)}));
  m.pmax = 0b10;
  a = saver_map(b, m, axes);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->map[1], 1) << "a free dim of extent 1 comes first";
  BTensor whole = value(labels({axis(kRows), axis(kHead)}));
  EXPECT_FALSE(saver_map(b, whole, axes).has_value()) << "the key splits would write copies of a whole value";
}

TEST(GenSpace, SizesAreDivisorsWithinTheBlockBudgetAndTheRepresentativeComesFirst) {
  SpecAxes axes = spec_axes();
  axes.extent = {1, 8, 16, 4};
  const Skeleton flash{{0, 1}, {axis(kRows)}, axis(kKeys)};
  std::vector<std::string> got;
  for (const ir::BlockParams& p : instantiations(flash, axes, 4, 128))
    got.push_back(std::to_string(p.grid[0]) + "x" + std::to_string(p.loop));
  EXPECT_EQ(got, (std::vector<std::string>{"2x2", "2x4", "2x8", "2x16", "4x2", "4x4", "4x8", "4x16"}))
      << "8 row blocks exceed the budget of 4";
  // Split-KV: the grid and the loop cut the keys; the split may also take its part in one iteration, never first.
  const Skeleton split{{0, 1}, {axis(kKeys)}, axis(kKeys)};
  got.clear();
  for (const ir::BlockParams& p : instantiations(split, axes, 8, 128))
    got.push_back(std::to_string(p.grid[0]) + "x" + std::to_string(p.loop));
  EXPECT_EQ(got, (std::vector<std::string>{"2x2", "2x4", "2x8", "2x1", "4x2", "4x4", "4x1", "8x2", "8x1"}));
  EXPECT_TRUE(instantiations(Skeleton{{0}, {axis(kRows)}, Label{}}, axes, 1, 128).empty()) << "no grid fits";
}

TEST(GenSpace, SkeletonsCutTheOperandsAxesAndAlwaysTheirStackedDims) {
  std::vector<KTensor> kt(2);
  kt[0].labels = labels({axis(kRows), axis(kHead)});
  kt[1].labels = labels({Label{kRows, kKeys, 4}, axis(kHead)});  // 4 key splits stacked along the rows' place
  size_t all = 0;
  skeletons_over({0}, kt, [&](const Skeleton&) { ++all; });
  EXPECT_EQ(all, 3u * 4u) << "grids {}, {rows}, {head}, {rows, head}, each with no loop, the rows' or the head's";
  skeletons_over({1}, kt, [&](const Skeleton& sk) {
    bool cut = sk.loop.stacked();
    for (const Label& l : sk.grid) cut |= l.stacked();
    EXPECT_TRUE(cut) << "the splits must be taken apart by the grid or the loop";
  });
  std::vector<Task> tasks = root_tasks({kt[0].labels, labels({axis(kHead), axis(kKeys)})});
  EXPECT_FALSE(tasks.front().block) << "predefined ops first";
  EXPECT_GT(tasks.size(), 1u);
}

}  // namespace
}  // namespace morgana::search::gen
