// Parses the text form (docs/spec-language.md) into kernel graphs with their block graphs. Every error is a
// UserError with file:line:column and a message a person understands; the parsed graphs pass the verifier.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace morgana::ir {

Module parse_module(std::string_view src, const std::string& file = "<input>");
// Reads and parses a file; the diagnostics name it as given.
Module parse_file(const std::filesystem::path& path);

// The bytes of a text file; a UserError naming it and saying why it cannot be read (it does not exist, is a folder,
// or the system's reason).
std::string read_source(const std::filesystem::path& path);

}  // namespace morgana::ir
