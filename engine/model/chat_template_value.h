// The values a chat template computes with, behaving as the Python objects jinja2 works on:
// None, bool, int, float, str, list, tuple, dict (insertion-ordered), jinja2's Undefined,
// namespace() objects and callables (macros, globals, bound methods). Internal to the
// renderer (chat_template*.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "model/chat_template.h"

namespace specula::jinja {

struct Value;
struct Dict;
struct Arguments;
using List = std::vector<Value>;
using Function = std::function<Value(Arguments&)>;

struct Value {
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Kind kind = Kind::Undefined;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;                         // String; Undefined: the message using it raises
  std::shared_ptr<const List> list;         // List (a tuple when `tuple`)
  std::shared_ptr<Dict> dict;               // Dict (never changed once built) and Namespace (changed by set)
  std::shared_ptr<const Function> function; // Callable
  bool tuple = false;

  static Value undefined(std::string message) { return with_text(Kind::Undefined, std::move(message)); }
  static Value none() { return Value{.kind = Kind::None}; }
  static Value from_bool(bool b) { return Value{.kind = Kind::Bool, .boolean = b}; }
  static Value from_int(int64_t i) { return Value{.kind = Kind::Int, .integer = i}; }
  static Value from_float(double d) { return Value{.kind = Kind::Float, .real = d}; }
  static Value string(std::string s) { return with_text(Kind::String, std::move(s)); }
  static Value make_list(List items, bool is_tuple = false);
  static Value make_dict(Dict d);
  static Value make_namespace(Dict d);
  static Value callable(Function f);
  static Value from_json(const nlohmann::ordered_json& j);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_string() const { return kind == Kind::String; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  bool is_sequence() const { return kind == Kind::List; }
  bool is_mapping() const { return kind == Kind::Dict; }
  double as_double() const { return kind == Kind::Float ? real : static_cast<double>(kind == Kind::Bool ? boolean : integer); }

  bool truthy() const;             // Python's bool()
  std::string str() const;         // Python's str(); Undefined prints as ""
  std::string repr() const;        // Python's repr() (lists and dicts print their items this way)
  std::string type_name() const;   // Python's type name: "dict", "list", "str", "NoneType", ...
  // The items a `for` loop visits: list items, dict keys, string characters; Undefined none.
  List iterate() const;

 private:
  static Value with_text(Kind k, std::string s) {
    Value v;
    v.kind = k;
    v.text = std::move(s);
    return v;
  }
};

// An insertion-ordered mapping, as Python's dict; small, so looked up by scanning.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(Value key, Value value);
};

// The arguments of a call, filter or test: positional first, then name=value ones.
struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;

  // The argument at `position` or named `name`; `fallback` when neither is given.
  Value get(size_t position, const std::string& name, Value fallback = Value::none()) const;
  bool has(size_t position, const std::string& name) const;
};

bool equals(const Value& a, const Value& b);  // Python's ==
// Python's <, <=, >, >= for numbers, strings and sequences; TypeError otherwise.
int compare(const Value& a, const Value& b, const char* op);

// json.dumps(value, ensure_ascii=False, indent=..., separators=..., sort_keys=...) as Python
// writes it; TypeError for values JSON has no form of.
struct JsonStyle {
  int indent = -1;  // -1: one line
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string to_json(const Value& value, const JsonStyle& style);

// Errors in jinja2's terms (the kinds of ChatTemplateError).
[[noreturn]] void raise(const std::string& kind, const std::string& message);
[[noreturn]] void raise_undefined(const Value& undefined);

// Python's repr() of a float: the shortest text that reads back, 1e+16 style from 1e16 on.
std::string python_float(double d);

}  // namespace specula::jinja
