#include "frontend/files.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ir/diagnostic.h"
#include "ir/parser.h"

namespace morgana::frontend {

std::string read_text_file(const std::filesystem::path& path) { return ir::read_source(path); }

void write_file_atomically(const std::filesystem::path& path, std::string_view text) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      check_writable(path);  // says why, where it can tell
      throw UserError("cannot write " + path.string());
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::string why = ec.message();
    std::filesystem::remove(tmp, ec);
    throw UserError("cannot write " + path.string() + ": " + why);
  }
}

void check_writable(const std::filesystem::path& path) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec))
    throw UserError("cannot write " + path.string() + ": the folder " + dir.string() + " does not exist");
  if (!std::filesystem::is_directory(dir, ec))
    throw UserError("cannot write " + path.string() + ": " + dir.string() + " is not a folder");
  if (std::filesystem::is_directory(path, ec))
    throw UserError("cannot write " + path.string() + ": it is a folder");
  if (::access(dir.c_str(), W_OK) != 0)
    throw UserError("cannot write " + path.string() + ": " + std::strerror(errno));
}

}  // namespace morgana::frontend
