// Python's str operations on UTF-8 text, for the chat-template renderer: Python counts,
// indexes and slices code points, strips Unicode whitespace and maps case in full
// (ICU's root locale: "ß".upper() is "SS").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace specula::jinja {

std::vector<std::string> utf8_characters(const std::string& text);  // one string per code point
size_t utf8_length(const std::string& text);                         // code points

enum class StripSide { Both, Left, Right };
// str.strip / lstrip / rstrip: Unicode whitespace, or the characters of `chars` when given.
std::string python_strip(const std::string& text, const std::optional<std::string>& chars, StripSide side);
// str.split(sep, maxsplit): on runs of whitespace when `sep` is absent (empty ends dropped).
std::vector<std::string> python_split(const std::string& text, const std::optional<std::string>& sep,
                                      int64_t maxsplit);
// str.replace(old, new, count); count < 0 replaces all.
std::string python_replace(const std::string& text, const std::string& from, const std::string& to, int64_t count);
std::string python_upper(const std::string& text);
std::string python_lower(const std::string& text);
std::string python_title(const std::string& text);       // str.title(): each word's first letter upper
std::string python_capitalize(const std::string& text);  // str.capitalize(): first upper, the rest lower

}  // namespace specula::jinja
