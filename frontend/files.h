// Reading and writing the CLI's text files with errors a person understands. Outputs are written atomically
// (a temporary file next to the target, then a rename), so an interrupted command never leaves half a file
// behind and never destroys the previous one.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace morgana::frontend {

// Throws UserError naming the file when it cannot be read.
std::string read_text_file(const std::filesystem::path& path);

// Throws UserError naming the file when it cannot be written.
void write_file_atomically(const std::filesystem::path& path, std::string_view text);

// Throws UserError naming `path` when it could not be written (its folder is missing, not a folder, or not
// writable): checked before a command's work, so that a mistyped -o does not fail only after a search or compile.
void check_writable(const std::filesystem::path& path);

}  // namespace morgana::frontend
