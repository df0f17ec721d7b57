// Python's str operations on UTF-8 text (code points, Unicode whitespace, full case mapping).
#include "model/chat_template_text.h"

#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/locid.h>

namespace specula::jinja {

namespace {

size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;  // a stray byte stands for itself
}

// Decodes the code point of one character of utf8_characters.
UChar32 code_point(const std::string& c) {
  int32_t i = 0;
  UChar32 cp = 0;
  U8_NEXT(reinterpret_cast<const uint8_t*>(c.data()), i, static_cast<int32_t>(c.size()), cp);
  return cp;
}

// str.isspace(): the characters Python counts as whitespace.
bool python_space(UChar32 cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

std::string to_utf8(const icu::UnicodeString& s) {
  std::string out;
  s.toUTF8String(out);
  return out;
}

icu::UnicodeString from_utf8(const std::string& s) {
  return icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
}

}  // namespace

std::vector<std::string> utf8_characters(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    const size_t n = std::min(utf8_sequence_length(static_cast<unsigned char>(text[i])), text.size() - i);
    out.push_back(text.substr(i, n));
    i += n;
  }
  return out;
}

size_t utf8_length(const std::string& text) {
  size_t n = 0;
  for (size_t i = 0; i < text.size(); ++n) i += utf8_sequence_length(static_cast<unsigned char>(text[i]));
  return n;
}

std::string python_strip(const std::string& text, const std::optional<std::string>& chars, StripSide side) {
  const std::vector<std::string> cs = utf8_characters(text);
  const std::vector<std::string> set = chars ? utf8_characters(*chars) : std::vector<std::string>{};
  auto strippable = [&](const std::string& c) {
    if (!chars) return python_space(code_point(c));
    for (const std::string& s : set) if (s == c) return true;
    return false;
  };
  size_t begin = 0, end = cs.size();
  if (side != StripSide::Right) while (begin < end && strippable(cs[begin])) ++begin;
  if (side != StripSide::Left) while (end > begin && strippable(cs[end - 1])) --end;
  std::string out;
  for (size_t i = begin; i < end; ++i) out += cs[i];
  return out;
}

std::vector<std::string> python_split(const std::string& text, const std::optional<std::string>& sep,
                                      int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    size_t start = 0;
    for (size_t found; (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) &&
                       (found = text.find(*sep, start)) != std::string::npos;) {
      parts.push_back(text.substr(start, found - start));
      start = found + sep->size();
    }
    parts.push_back(text.substr(start));
    return parts;
  }
  // whitespace runs separate words; after maxsplit splits the rest stays whole (left-stripped)
  const std::vector<std::string> cs = utf8_characters(text);
  size_t i = 0;
  while (true) {
    while (i < cs.size() && python_space(code_point(cs[i]))) ++i;
    if (i == cs.size()) break;
    std::string word;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      for (; i < cs.size(); ++i) word += cs[i];
      parts.push_back(python_strip(word, std::nullopt, StripSide::Right));
      break;
    }
    for (; i < cs.size() && !python_space(code_point(cs[i])); ++i) word += cs[i];
    parts.push_back(word);
  }
  return parts;
}

std::string python_replace(const std::string& text, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every character
    const std::vector<std::string> cs = utf8_characters(text);
    int64_t done = 0;
    for (const std::string& c : cs) {
      if (count < 0 || done < count) { out += to; ++done; }
      out += c;
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t start = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    const size_t found = text.find(from, start);
    if (found == std::string::npos) break;
    out += text.substr(start, found - start) + to;
    start = found + from.size();
  }
  return out + text.substr(start);
}

std::string python_upper(const std::string& text) { return to_utf8(from_utf8(text).toUpper(icu::Locale::getRoot())); }

std::string python_lower(const std::string& text) { return to_utf8(from_utf8(text).toLower(icu::Locale::getRoot())); }

// str.title(): a cased character after an uncased one starts a word and is title-cased.
std::string python_title(const std::string& text) {
  std::string out;
  bool previous_cased = false;
  for (const std::string& c : utf8_characters(text)) {
    const UChar32 cp = code_point(c);
    const bool cased = u_hasBinaryProperty(cp, UCHAR_CASED);
    const UChar32 mapped = cased ? (previous_cased ? u_tolower(cp) : u_totitle(cp)) : cp;
    out += to_utf8(icu::UnicodeString(mapped));
    previous_cased = cased;
  }
  return out;
}

std::string python_capitalize(const std::string& text) {
  const std::vector<std::string> cs = utf8_characters(text);
  if (cs.empty()) return "";
  std::string rest;
  for (size_t i = 1; i < cs.size(); ++i) rest += cs[i];
  return to_utf8(icu::UnicodeString(u_totitle(code_point(cs[0])))) + python_lower(rest);
}

}  // namespace specula::jinja
