// Python semantics of the renderer's values: truth, str/repr, equality, ordering, JSON.
#include "model/chat_template_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "model/chat_template_text.h"

namespace specula::jinja {

void raise(const std::string& kind, const std::string& message) { throw ChatTemplateError(kind, message); }

void raise_undefined(const Value& undefined) { raise("UndefinedError", undefined.text); }

Value Value::make_list(List items, bool is_tuple) {
  Value v{.kind = Kind::List};
  v.list = std::make_shared<const List>(std::move(items));
  v.tuple = is_tuple;
  return v;
}

Value Value::make_dict(Dict d) {
  Value v{.kind = Kind::Dict};
  v.dict = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::make_namespace(Dict d) {
  Value v = make_dict(std::move(d));
  v.kind = Kind::Namespace;
  return v;
}

Value Value::callable(Function f) {
  Value v{.kind = Kind::Callable};
  v.function = std::make_shared<const Function>(std::move(f));
  return v;
}

// JSON numbers keep their kind: 1 is an int, 1.0 a float, as json.loads reads them.
Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return from_bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return from_int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return from_int(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return from_float(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& item : j) items.push_back(from_json(item));
      return make_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [key, item] : j.items()) d.items.emplace_back(string(key), from_json(item));
      return make_dict(std::move(d));
    }
    default: return none();
  }
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::Undefined: case Kind::None: return false;
    case Kind::Bool: return boolean;
    case Kind::Int: return integer != 0;
    case Kind::Float: return real != 0;
    case Kind::String: return !text.empty();
    case Kind::List: return !list->empty();
    case Kind::Dict: return !dict->items.empty();
    default: return true;
  }
}

std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  // shortest round-trip digits in scientific form: [-]D[.DDD]e[+-]XX
  const auto end = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific).ptr;
  std::string sci(buf, end);
  const size_t e = sci.find('e');
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string digits;
  const bool negative = sci[0] == '-';
  for (size_t i = negative ? 1 : 0; i < e; ++i) if (sci[i] != '.') digits += sci[i];
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {  // Python's repr switches to exponent form here
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += std::string(".") + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
  }
  if (exponent < 0) return out + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  const size_t int_digits = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= int_digits) return out + digits + std::string(int_digits - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

std::string Value::str() const {
  switch (kind) {
    case Kind::Undefined: return "";
    case Kind::String: return text;
    default: return repr();
  }
}

namespace {

// Python's repr of a str: single quotes unless the text has ' and no ".
std::string repr_string(const std::string& s) {
  const bool use_double = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char quote = use_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') out += std::string("\\") + c;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    } else {
      out += c;
    }
  }
  return out + quote;
}

}  // namespace

std::string Value::repr() const {
  switch (kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "None";
    case Kind::Bool: return boolean ? "True" : "False";
    case Kind::Int: return std::to_string(integer);
    case Kind::Float: return python_float(real);
    case Kind::String: return repr_string(text);
    case Kind::List: {
      std::string out = tuple ? "(" : "[";
      for (size_t i = 0; i < list->size(); ++i) out += (i ? ", " : "") + (*list)[i].repr();
      if (tuple && list->size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Kind::Dict: {
      std::string out = "{";
      for (size_t i = 0; i < dict->items.size(); ++i) {
        out += (i ? ", " : "") + dict->items[i].first.repr() + ": " + dict->items[i].second.repr();
      }
      return out + "}";
    }
    case Kind::Namespace: return "<Namespace>";
    case Kind::Callable: return "<function>";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return tuple ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Callable: return "function";
  }
  return "object";
}

List Value::iterate() const {
  switch (kind) {
    case Kind::Undefined: return {};
    case Kind::List: return *list;
    case Kind::Dict: {
      List keys;
      for (const auto& item : dict->items) keys.push_back(item.first);
      return keys;
    }
    case Kind::String: {
      List chars;
      for (std::string& c : utf8_characters(text)) chars.push_back(string(std::move(c)));
      return chars;
    }
    default: raise("TypeError", std::string("'") + type_name() + "' object is not iterable");
  }
}

const Value* Dict::find(const Value& key) const {
  for (const auto& item : items) if (equals(item.first, key)) return &item.second;
  return nullptr;
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& item : items) if (item.first.is_string() && item.first.text == key) return &item.second;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& item : items) {
    if (equals(item.first, key)) {
      item.second = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Arguments::get(size_t position, const std::string& name, Value fallback) const {
  for (const auto& [n, v] : named) if (n == name) return v;
  if (position < positional.size()) return positional[position];
  return fallback;
}

bool Arguments::has(size_t position, const std::string& name) const {
  if (position < positional.size()) return true;
  return std::any_of(named.begin(), named.end(), [&](const auto& p) { return p.first == name; });
}

namespace {
int64_t whole_number(const Value& v) { return v.kind == Value::Kind::Bool ? v.boolean : v.integer; }
}  // namespace

bool equals(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    // ints compare exactly (a double would round above 2^53); a float compares as a float
    if (a.kind != K::Float && b.kind != K::Float) return whole_number(a) == whole_number(b);
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::Undefined: case K::None: return true;
    case K::String: return a.text == b.text;
    case K::List:
      if (a.tuple != b.tuple || a.list->size() != b.list->size()) return false;
      for (size_t i = 0; i < a.list->size(); ++i) if (!equals((*a.list)[i], (*b.list)[i])) return false;
      return true;
    case K::Dict:
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [key, value] : a.dict->items) {
        const Value* other = b.dict->find(key);
        if (!other || !equals(value, *other)) return false;
      }
      return true;
    default: return a.dict == b.dict && a.function == b.function;
  }
}

int compare(const Value& a, const Value& b, const char* op) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  if (a.is_number() && b.is_number()) {
    const double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) return a.text < b.text ? -1 : (a.text > b.text ? 1 : 0);
  if (a.is_sequence() && b.is_sequence() && a.tuple == b.tuple) {
    const size_t n = std::min(a.list->size(), b.list->size());
    for (size_t i = 0; i < n; ++i) {
      if (!equals((*a.list)[i], (*b.list)[i])) return compare((*a.list)[i], (*b.list)[i], op);
    }
    return a.list->size() < b.list->size() ? -1 : (a.list->size() > b.list->size() ? 1 : 0);
  }
  raise("TypeError", std::string("'") + op + "' not supported between instances of '" + a.type_name() + "' and '" +
                         b.type_name() + "'");
}

namespace {

// A JSON string as json.dumps(ensure_ascii=False) writes it: only ", \ and controls escaped.
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned char>(c));
          out += hex;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string json_key(const Value& key) {
  switch (key.kind) {
    case Value::Kind::String: return json_string(key.text);
    case Value::Kind::None: return "\"null\"";
    case Value::Kind::Bool: return key.boolean ? "\"true\"" : "\"false\"";
    case Value::Kind::Int: case Value::Kind::Float: return std::string("\"") + key.repr() + "\"";
    default: raise("TypeError", "keys must be str, int, float, bool or None, not " + key.type_name());
  }
}

void write_json(const Value& v, const JsonStyle& style, int depth, std::string& out);

// The line break and indentation before an item at `depth` (nothing on one line).
std::string json_break(const JsonStyle& style, int depth) {
  if (style.indent < 0) return "";
  return std::string("\n") + std::string(static_cast<size_t>(style.indent * depth), ' ');
}

void write_json_list(const List& items, const JsonStyle& style, int depth, std::string& out) {
  if (items.empty()) {
    out += "[]";
    return;
  }
  out += "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += style.item_separator;
    out += json_break(style, depth + 1);
    write_json(items[i], style, depth + 1, out);
  }
  out += json_break(style, depth) + "]";
}

void write_json_dict(const Dict& dict, const JsonStyle& style, int depth, std::string& out) {
  if (dict.items.empty()) {
    out += "{}";
    return;
  }
  std::vector<const std::pair<Value, Value>*> items;
  for (const auto& item : dict.items) items.push_back(&item);
  if (style.sort_keys) {
    std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return compare(a->first, b->first, "<") < 0; });
  }
  out += "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += style.item_separator;
    out += json_break(style, depth + 1) + json_key(items[i]->first) + style.key_separator;
    write_json(items[i]->second, style, depth + 1, out);
  }
  out += json_break(style, depth) + "}";
}

void write_json(const Value& v, const JsonStyle& style, int depth, std::string& out) {
  if (depth > 200) raise("ValueError", "Circular reference detected");
  switch (v.kind) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.boolean ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.integer); return;
    case Value::Kind::Float:
      out += std::isnan(v.real) ? "NaN" : std::isinf(v.real) ? (v.real > 0 ? "Infinity" : "-Infinity") : python_float(v.real);
      return;
    case Value::Kind::String: out += json_string(v.text); return;
    case Value::Kind::List: write_json_list(*v.list, style, depth, out); return;
    case Value::Kind::Dict: write_json_dict(*v.dict, style, depth, out); return;
    default: raise("TypeError", "Object of type " + v.type_name() + " is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const Value& value, const JsonStyle& style) {
  std::string out;
  write_json(value, style, 0, out);
  return out;
}

}  // namespace specula::jinja
