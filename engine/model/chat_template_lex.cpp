// The chat-template lexer: template text, tags and the tokens inside them, with jinja2's
// whitespace control as Hugging Face configures it:
//   {%- / {{- / {#-   strip all whitespace before the tag;  -%} / -}} / -#}  all after it;
//   trim_blocks       a block or comment tag eats the one newline right after it;
//   lstrip_blocks     spaces and tabs between a line's start and a block or comment tag go;
//   {%+ / +%}         turn lstrip_blocks / trim_blocks off for that tag.
#include <cstring>
#include <optional>

#include "model/chat_template_ast.h"

namespace specula::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string rstrip_all(const std::string& s) {
  size_t end = s.size();
  while (end > 0 && is_space(s[end - 1])) --end;
  return s.substr(0, end);
}

// Appends the UTF-8 form of a code point.
void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  // jinja2 reads \r\n and \r as \n everywhere, and drops one newline at the very end
  // (keep_trailing_newline is off).
  explicit Lexer(const std::string& source) {
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] != '\r') src_ += source[i];
      else if (i + 1 >= source.size() || source[i + 1] != '\n') src_ += '\n';
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      std::string text = src_.substr(pos_, tag - pos_);
      if (tag == src_.size()) {
        emit_text(std::move(text));
        break;
      }
      lex_tag(tag, std::move(text));
    }
    tokens_.push_back(Token{.kind = TokenKind::End, .line = line_});
    return std::move(tokens_);
  }

 private:
  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;  // the text being read begins a line (template start, or after a newline a tag ate)
  std::vector<Token> tokens_;

  [[noreturn]] void fail(const std::string& message) const {
    raise("TemplateSyntaxError", message + " (line " + std::to_string(line_) + ")");
  }

  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  void count_lines(size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) line_ += src_[i] == '\n';
  }

  void emit_text(std::string text) {
    count_lines(pos_, pos_ + text.size());
    if (!text.empty()) tokens_.push_back(Token{.kind = TokenKind::Text, .text = std::move(text), .line = line_});
  }

  // Applies the tag's left-side whitespace control to the text before it, then reads the tag.
  void lex_tag(size_t tag, std::string text) {
    const char type = src_[tag + 1];
    const char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
    const size_t consumed = text.size();
    if (modifier == '-') {
      text = rstrip_all(text);
    } else if (modifier != '+' && type != '{') {
      text = lstrip_line(text);
    }
    count_lines(pos_, pos_ + consumed);
    if (!text.empty()) tokens_.push_back(Token{.kind = TokenKind::Text, .text = std::move(text), .line = line_});
    pos_ = tag + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
    if (type == '#') {
      lex_comment();
    } else {
      lex_expression_tag(type == '{');
    }
  }

  // lstrip_blocks: whitespace from the line's start up to the tag goes.
  std::string lstrip_line(const std::string& text) const {
    const size_t newline = text.rfind('\n');
    const size_t line_start = newline == std::string::npos ? 0 : newline + 1;
    if (line_start == 0 && !line_starting_) return text;
    if (line_start == text.size()) return text;
    for (size_t i = line_start; i < text.size(); ++i) {
      if (!is_space(text[i])) return text;
    }
    return text.substr(0, line_start);
  }

  // After a tag's end marker: `-` strips all whitespace, a block's plain end eats one newline.
  void after_tag_end(char modifier, bool is_block_or_comment) {
    const size_t start = pos_;
    if (modifier == '-') {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    } else if (modifier != '+' && is_block_or_comment && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    line_starting_ = pos_ > start && src_[pos_ - 1] == '\n';
    count_lines(start, pos_);
  }

  void lex_comment() {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail("missing end of comment tag");
    const char modifier = end > pos_ ? src_[end - 1] : '\0';
    count_lines(pos_, end);
    pos_ = end + 2;
    after_tag_end(modifier == '-' || modifier == '+' ? modifier : '\0', true);
  }

  void lex_expression_tag(bool variable) {
    tokens_.push_back(Token{.kind = variable ? TokenKind::VariableBegin : TokenKind::BlockBegin, .line = line_});
    const size_t first_token = tokens_.size();
    int depth = 0;
    const char closer = variable ? '}' : '%';
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) line_ += src_[pos_++] == '\n';
      if (pos_ >= src_.size()) fail(variable ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'");
      if (depth == 0) {
        const std::optional<char> end_modifier = tag_end_at(closer);
        if (end_modifier) {
          tokens_.push_back(Token{.kind = variable ? TokenKind::VariableEnd : TokenKind::BlockEnd, .line = line_});
          after_tag_end(*end_modifier, !variable);
          if (!variable && is_raw(first_token)) lex_raw_body();
          return;
        }
      }
      lex_token(depth);
    }
  }

  // At pos_: `}}` / `%}` with an optional -/+ before it: the modifier ('\0' for none); moves past it.
  std::optional<char> tag_end_at(char closer) {
    for (const char modifier : {'-', '+', '\0'}) {
      const size_t at = pos_ + (modifier ? 1 : 0);
      if (modifier && (pos_ >= src_.size() || src_[pos_] != modifier)) continue;
      if (at + 1 < src_.size() && src_[at] == closer && src_[at + 1] == '}') {
        pos_ = at + 2;
        return modifier;
      }
    }
    return std::nullopt;
  }

  bool is_raw(size_t first_token) const {
    return tokens_.size() == first_token + 2 && tokens_[first_token].kind == TokenKind::Name &&
           tokens_[first_token].text == "raw";
  }

  // {% raw %}...{% endraw %}: the text between, untouched; the raw tags themselves vanish.
  void lex_raw_body() {
    tokens_.resize(tokens_.size() - 3);  // BlockBegin, raw, BlockEnd
    for (size_t at = src_.find("{%", pos_); at != std::string::npos; at = src_.find("{%", at + 2)) {
      size_t i = at + 2;
      const char modifier = i < src_.size() && (src_[i] == '-' || src_[i] == '+') ? src_[i++] : '\0';
      while (i < src_.size() && is_space(src_[i])) ++i;
      if (src_.compare(i, 6, "endraw") != 0) continue;
      i += 6;
      while (i < src_.size() && is_space(src_[i])) ++i;
      const char end_modifier = i < src_.size() && (src_[i] == '-' || src_[i] == '+') ? src_[i++] : '\0';
      if (src_.compare(i, 2, "%}") != 0) continue;
      std::string body = src_.substr(pos_, at - pos_);
      if (modifier == '-') body = rstrip_all(body);
      emit_text(std::move(body));
      pos_ = i + 2;
      after_tag_end(end_modifier, true);
      return;
    }
    fail("missing end of raw directive");
  }

  void lex_token(int& depth) {
    const char c = src_[pos_];
    if (is_name_start(c)) {
      const size_t start = pos_;
      while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
      tokens_.push_back(Token{.kind = TokenKind::Name, .text = src_.substr(start, pos_ - start), .line = line_});
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      lex_number();
    } else if (c == '\'' || c == '"') {
      lex_string(c);
    } else {
      lex_operator(depth);
    }
  }

  void lex_number() {
    const size_t start = pos_;
    bool is_float = false;
    auto digits = [&] { while (pos_ < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_; };
    digits();
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      is_float = true;
      ++pos_;
      digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t i = pos_ + 1;
      if (i < src_.size() && (src_[i] == '+' || src_[i] == '-')) ++i;
      if (i < src_.size() && std::isdigit(static_cast<unsigned char>(src_[i]))) {
        is_float = true;
        pos_ = i;
        digits();
      }
    }
    std::string text;
    for (size_t i = start; i < pos_; ++i) if (src_[i] != '_') text += src_[i];
    Token t{.kind = is_float ? TokenKind::Float : TokenKind::Integer, .text = text, .line = line_};
    try {
      if (is_float) t.real = std::stod(text);
      else t.integer = std::stoll(text);
    } catch (const std::exception&) {
      fail("number out of range: " + text);
    }
    tokens_.push_back(std::move(t));
  }

  // A quoted string with Python's escapes (\n, \t, \xNN, \uNNNN, ...; unknown ones kept).
  void lex_string(char quote) {
    const int start_line = line_;
    std::string value;
    ++pos_;
    while (true) {
      if (pos_ >= src_.size()) fail("unterminated string");
      const char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\' || pos_ >= src_.size()) {
        value += c;
        continue;
      }
      read_escape(value);
    }
    tokens_.push_back(Token{.kind = TokenKind::String, .text = std::move(value), .line = start_line});
  }

  void read_escape(std::string& value) {
    const char e = src_[pos_++];
    switch (e) {
      case 'n': value += '\n'; return;
      case 't': value += '\t'; return;
      case 'r': value += '\r'; return;
      case '\\': value += '\\'; return;
      case '\'': value += '\''; return;
      case '"': value += '"'; return;
      case 'a': value += '\a'; return;
      case 'b': value += '\b'; return;
      case 'f': value += '\f'; return;
      case 'v': value += '\v'; return;
      case '0': value += '\0'; return;
      case '\n': ++line_; return;  // a line continuation
      case 'x': append_utf8(value, read_hex(2)); return;
      case 'u': append_utf8(value, read_hex(4)); return;
      case 'U': append_utf8(value, read_hex(8)); return;
      default: value += '\\'; value += e; return;
    }
  }

  uint32_t read_hex(int digits) {
    if (pos_ + static_cast<size_t>(digits) > src_.size()) fail("truncated \\x, \\u or \\U escape");
    const std::string hex = src_.substr(pos_, static_cast<size_t>(digits));
    for (const char h : hex) if (!std::isxdigit(static_cast<unsigned char>(h))) fail("bad escape \\" + hex);
    pos_ += static_cast<size_t>(digits);
    const unsigned long cp = std::stoul(hex, nullptr, 16);
    if (cp > 0x10FFFF) fail("escape beyond Unicode: " + hex);
    return static_cast<uint32_t>(cp);
  }

  void lex_operator(int& depth) {
    static const char* const two_char[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : two_char) {
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back(Token{.kind = TokenKind::Operator, .text = op, .line = line_});
        pos_ += 2;
        return;
      }
    }
    const char c = src_[pos_];
    if (!std::strchr("+-*/%~|.,:()[]{}=<>", c)) fail(std::string("unexpected character '") + c + "'");
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') {
      if (depth == 0) fail(std::string("unexpected '") + c + "'");
      --depth;
    }
    tokens_.push_back(Token{.kind = TokenKind::Operator, .text = std::string(1, c), .line = line_});
    ++pos_;
  }
};

}  // namespace

std::vector<Token> lex_template(const std::string& source) { return Lexer(source).run(); }

}  // namespace specula::jinja
