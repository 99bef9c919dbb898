// libmorgana_runtime.so as a user links it: at run time it may need libc, libdl, libm and the dynamic loader
// and nothing else (no libstdc++, no libgcc_s, no libcuda), and it exports the mg_* functions of the C API
// and nothing else. Read with readelf from binutils, which the compiler needs anyway.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>

namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  EXPECT_EQ(pclose(p), 0) << cmd;
  return out;
}

std::string library() {
  const char* so = std::getenv("MORGANA_RUNTIME_SO");
  EXPECT_NE(so, nullptr) << "MORGANA_RUNTIME_SO is set by meson";
  return so ? so : "";
}

TEST(RuntimeElf, NeedsOnlyLibcLibdlLibm) {
  // " 0x0000000000000001 (NEEDED)             Shared library: [libc.so.6]"
  std::istringstream in(run("readelf -d -W '" + library() + "'"));
  const std::set<std::string> allowed = {"libc.so.6", "libdl.so.2", "libm.so.6", "ld-linux-x86-64.so.2"};
  int needed = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("(NEEDED)") == std::string::npos) continue;
    size_t open = line.find('['), close = line.find(']');
    ASSERT_NE(open, std::string::npos) << line;
    std::string lib = line.substr(open + 1, close - open - 1);
    EXPECT_TRUE(allowed.count(lib)) << "libmorgana_runtime.so needs " << lib;
    ++needed;
  }
  EXPECT_GT(needed, 0) << "readelf found no NEEDED entries at all";
}

TEST(RuntimeElf, ExportsOnlyTheCApi) {
  // "    12: 0000000000012340   153 FUNC    GLOBAL DEFAULT   14 mg_bundle_open"
  std::istringstream in(run("readelf --dyn-syms -W '" + library() + "'"));
  std::set<std::string> exported;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string num, value, size, type, bind, vis, ndx, name;
    if (!(fields >> num >> value >> size >> type >> bind >> vis >> ndx >> name)) continue;
    if (num.back() != ':' || ndx == "UND" || ndx == "ABS" || (bind != "GLOBAL" && bind != "WEAK")) continue;
    name = name.substr(0, name.find('@'));
    EXPECT_EQ(name.rfind("mg_", 0), 0u) << "libmorgana_runtime.so exports " << name;
    exported.insert(name);
  }
  for (const char* fn : {"mg_status_name", "mg_last_error", "mg_runtime_api_version", "mg_bundle_open",
                         "mg_bundle_open_memory", "mg_bundle_close", "mg_bundle_program_count",
                         "mg_bundle_program", "mg_program_describe", "mg_program_param", "mg_program_variant",
                         "mg_bundle_select_program", "mg_program_prepare", "mg_program_launch",
                         "mg_bundle_launch", "mg_device_count", "mg_device_describe"})
    EXPECT_TRUE(exported.count(fn)) << fn << " is not exported";
  EXPECT_EQ(exported.size(), 17u);
}

}  // namespace
