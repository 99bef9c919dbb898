// Tokens of the text form. Newlines are whitespace; '#' starts a comment to the end of the line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/diagnostic.h"

namespace morgana::ir {

enum class Tok : uint8_t { Ident, Number, Punct, Phi, End };

struct Token {
  Tok kind;
  std::string text;  // identifier, number or punctuation as written; "φ" or "-" for Phi
  uint32_t line, column;
};

// Throws UserError at the offending character.
std::vector<Token> lex(std::string_view src, const std::string& file);

std::string describe(const Token& t);  // "'foo'", "number 12", "end of file"

}  // namespace morgana::ir
