// Golden-file comparison with a bless switch: MORGANA_BLESS=1 rewrites the expected file instead of comparing,
// so a deliberate change of output is one command plus a reviewed diff.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace morgana::testing {

inline bool blessing() {
  const char* b = std::getenv("MORGANA_BLESS");
  return b && std::string(b) == "1";
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void expect_golden(const std::filesystem::path& expected, const std::string& actual) {
  if (blessing()) {
    std::filesystem::create_directories(expected.parent_path());
    std::ofstream(expected, std::ios::binary) << actual;
    std::cout << "blessed " << expected.string() << "\n";
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(expected))
      << expected << " does not exist; run with MORGANA_BLESS=1 to create it. Actual output:\n" << actual;
  EXPECT_EQ(read_file(expected), actual) << "golden file " << expected
                                         << " differs (MORGANA_BLESS=1 rewrites it after review)";
}

}  // namespace morgana::testing
