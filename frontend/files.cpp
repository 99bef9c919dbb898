#include "frontend/files.h"

#include <fstream>
#include <sstream>

#include "ir/diagnostic.h"

namespace morgana::frontend {

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot open file", {path.string(), 0, 0});
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw UserError("cannot read file", {path.string(), 0, 0});
  return ss.str();
}

void write_file_atomically(const std::filesystem::path& path, std::string_view text) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    out.close();
    if (!out) throw UserError("cannot write " + tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::string why = ec.message();
    std::filesystem::remove(tmp, ec);
    throw UserError("cannot write " + path.string() + ": " + why);
  }
}

}  // namespace morgana::frontend
