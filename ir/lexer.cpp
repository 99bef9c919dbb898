#include "ir/lexer.h"

#include <cctype>

namespace morgana::ir {

namespace {
bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
}  // namespace

std::vector<Token> lex(std::string_view src, const std::string& file) {
  std::vector<Token> out;
  uint32_t line = 1, col = 1;
  size_t i = 0;
  auto advance = [&](size_t n) {
    for (size_t k = 0; k < n; ++k, ++i) {
      if (src[i] == '\n') {
        ++line;
        col = 1;
      } else if ((static_cast<unsigned char>(src[i]) & 0xC0) != 0x80) {
        ++col;  // count code points, not bytes
      }
    }
  };
  while (i < src.size()) {
    char c = src[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      advance(1);
      continue;
    }
    if (c == '#') {
      while (i < src.size() && src[i] != '\n') advance(1);
      continue;
    }
    Token t{Tok::Punct, "", line, col};
    size_t start = i;
    if (ident_start(c)) {
      while (i < src.size() && ident_char(src[i])) advance(1);
      t.kind = Tok::Ident;
    } else if (digit(c) || ((c == '-' || c == '.') && i + 1 < src.size() && (digit(src[i + 1]) || src[i + 1] == '.'))) {
      advance(1);
      while (i < src.size()) {
        char d = src[i];
        bool exp_sign = (d == '+' || d == '-') && (src[i - 1] == 'e' || src[i - 1] == 'E');
        if (!(digit(d) || d == '.' || d == 'e' || d == 'E' || exp_sign)) break;
        advance(1);
      }
      t.kind = Tok::Number;
    } else if (c == '-') {
      advance(1);
      t.kind = Tok::Phi;
    } else if (static_cast<unsigned char>(c) == 0xCF && i + 1 < src.size() &&
               static_cast<unsigned char>(src[i + 1]) == 0x86) {
      advance(2);  // U+03C6 φ
      t.kind = Tok::Phi;
    } else if (std::string_view("()[]{},=:").find(c) != std::string_view::npos) {
      advance(1);
    } else {
      std::string shown = std::isprint(static_cast<unsigned char>(c)) ? std::string(1, c) : "\\x" + [&] {
        const char* hex = "0123456789abcdef";
        unsigned char u = static_cast<unsigned char>(c);
        return std::string{hex[u >> 4], hex[u & 15]};
      }();
      throw UserError("unexpected character '" + shown + "'", {file, line, col});
    }
    t.text = std::string(src.substr(start, i - start));
    out.push_back(std::move(t));
  }
  out.push_back({Tok::End, "", line, col});
  return out;
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::End: return "end of file";
    case Tok::Number: return "number " + t.text;
    default: return "'" + t.text + "'";
  }
}

}  // namespace morgana::ir
