// Reaching into values as jinja2's immutable sandbox does: attributes and methods (str, dict,
// list), items and slices, and the globals (range, namespace, dict, raise_exception).
// Methods that would change a list or dict are refused with SecurityError, as there.
#include <set>

#include "model/chat_template_eval.h"
#include "model/chat_template_text.h"

namespace specula::jinja {

namespace {

// "'dict object' has no attribute 'x'", "list object has no element 3": jinja2's messages.
std::string object_name(const Value& v) { return v.type_name() + " object"; }

Value missing_attribute(const Value& object, const std::string& name) {
  return Value::undefined(std::string("'") + object_name(object) + "' has no attribute '" + name + "'");
}

std::optional<std::string> optional_string(const Value& v) {
  if (v.is_string()) return v.text;
  if (v.kind == Value::Kind::None || v.is_undefined()) return std::nullopt;
  raise("TypeError", "must be str or None, not " + v.type_name());
}

int64_t int_argument(const Value& v, const char* what) {
  if (v.kind == Value::Kind::Int) return v.integer;
  if (v.kind == Value::Kind::Bool) return v.boolean;
  raise("TypeError", std::string(what) + " must be an integer, not " + v.type_name());
}

Value string_list(const std::vector<std::string>& parts) {
  List items;
  for (const std::string& p : parts) items.push_back(Value::string(p));
  return Value::make_list(std::move(items));
}

// str.startswith / endswith with one prefix or a tuple of them.
bool affix_matches(const std::string& text, const Value& affixes, bool at_start) {
  auto matches = [&](const Value& a) {
    if (!a.is_string()) raise("TypeError", "startswith first arg must be str or a tuple of str, not " + a.type_name());
    if (a.text.size() > text.size()) return false;
    return at_start ? text.compare(0, a.text.size(), a.text) == 0
                    : text.compare(text.size() - a.text.size(), a.text.size(), a.text) == 0;
  };
  if (affixes.is_sequence()) {
    for (const Value& a : *affixes.list) if (matches(a)) return true;
    return false;
  }
  return matches(affixes);
}

// str.format with {} / {0} / {name} fields (no format specs).
std::string python_format(const std::string& pattern, const Arguments& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if ((c == '{' || c == '}') && i + 1 < pattern.size() && pattern[i + 1] == c) {
      out += c;
      ++i;
    } else if (c == '{') {
      const size_t close = pattern.find('}', i);
      if (close == std::string::npos) raise("ValueError", "Single '{' encountered in format string");
      const std::string field = pattern.substr(i + 1, close - i - 1);
      Value v;
      if (field.empty()) v = args.get(auto_index++, "\x01", Value::undefined("Replacement index out of range"));
      else if (std::isdigit(static_cast<unsigned char>(field[0]))) v = args.get(std::stoul(field), "\x01", Value::undefined("Replacement index out of range"));
      else v = args.get(SIZE_MAX, field, Value::undefined("'" + field + "'"));
      if (v.is_undefined()) raise("IndexError", v.text);
      out += v.str();
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}

Value string_method(const std::string& text, const std::string& name, Arguments& args) {
  const Value a0 = args.get(0, "\x01");
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const StripSide side = name == "strip" ? StripSide::Both : name == "lstrip" ? StripSide::Left : StripSide::Right;
    return Value::string(python_strip(text, optional_string(args.get(0, "chars")), side));
  }
  if (name == "split") {
    return string_list(python_split(text, optional_string(args.get(0, "sep")),
                                    int_argument(args.get(1, "maxsplit", Value::from_int(-1)), "maxsplit")));
  }
  if (name == "startswith" || name == "endswith") return Value::from_bool(affix_matches(text, a0, name == "startswith"));
  if (name == "upper") return Value::string(python_upper(text));
  if (name == "lower") return Value::string(python_lower(text));
  if (name == "title") return Value::string(python_title(text));
  if (name == "capitalize") return Value::string(python_capitalize(text));
  if (name == "replace") {
    return Value::string(python_replace(text, args.get(0, "old").str(), args.get(1, "new").str(),
                                        int_argument(args.get(2, "count", Value::from_int(-1)), "count")));
  }
  if (name == "find") {
    const size_t at = text.find(a0.str());
    return Value::from_int(at == std::string::npos ? -1 : static_cast<int64_t>(utf8_length(text.substr(0, at))));
  }
  if (name == "count") {
    const std::string sub = a0.str();
    int64_t n = 0;
    for (size_t at = text.find(sub); !sub.empty() && at != std::string::npos; at = text.find(sub, at + sub.size())) ++n;
    return Value::from_int(sub.empty() ? static_cast<int64_t>(utf8_length(text)) + 1 : n);
  }
  if (name == "join") {
    std::string out;
    const List items = a0.iterate();
    for (size_t i = 0; i < items.size(); ++i) out += (i ? text : "") + items[i].str();
    return Value::string(std::move(out));
  }
  if (name == "format") return Value::string(python_format(text, args));
  if (name == "splitlines") return string_list(python_split(python_replace(text, "\r\n", "\n", -1), std::string("\n"), -1));
  auto all_of = [&](int (*predicate)(int)) {
    if (text.empty()) return Value::from_bool(false);
    for (const char c : text) if (!predicate(static_cast<unsigned char>(c))) return Value::from_bool(false);
    return Value::from_bool(true);
  };
  if (name == "isdigit") return all_of(::isdigit);
  if (name == "isalpha") return all_of(::isalpha);
  if (name == "isalnum") return all_of(::isalnum);
  if (name == "isspace") return all_of(::isspace);
  if (name == "islower") return Value::from_bool(text != python_upper(text) && text == python_lower(text));
  if (name == "isupper") return Value::from_bool(text != python_lower(text) && text == python_upper(text));
  raise("AttributeError", "'str' object has no attribute '" + name + "'");
}

Value dict_method(const Value& object, const std::string& name, Arguments& args) {
  const Dict& d = *object.dict;
  if (name == "get") {
    const Value* found = d.find(args.get(0, "key"));
    return found ? *found : args.get(1, "default");
  }
  List out;
  for (const auto& [key, value] : d.items) {
    if (name == "keys") out.push_back(key);
    else if (name == "values") out.push_back(value);
    else out.push_back(Value::make_list({key, value}, true));
  }
  return Value::make_list(std::move(out));
}

Value list_method(const Value& object, const std::string& name, Arguments& args) {
  const List& items = *object.list;
  const Value needle = args.get(0, "\x01");
  int64_t count = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!equals(items[i], needle)) continue;
    if (name == "index") return Value::from_int(static_cast<int64_t>(i));
    ++count;
  }
  if (name == "index") raise("ValueError", needle.repr() + " is not in list");
  return Value::from_int(count);
}

const std::set<std::string> kStringMethods = {"strip", "lstrip", "rstrip", "split", "startswith", "endswith", "upper",
                                              "lower", "title", "capitalize", "replace", "find", "count", "join",
                                              "format", "splitlines", "isdigit", "isalpha", "isalnum", "isspace",
                                              "islower", "isupper"};
const std::set<std::string> kDictMethods = {"get", "items", "keys", "values"};
const std::set<std::string> kListMethods = {"index", "count"};
// What the immutable sandbox refuses: methods that change a list or dict in place.
const std::set<std::string> kMutatingMethods = {"append", "extend", "insert", "pop", "remove", "clear", "sort",
                                                "reverse", "update", "setdefault", "popitem", "__setitem__"};

Value bind(const Value& object, const std::string& name) {
  return Value::callable([object, name](Arguments& args) {
    if (object.is_string()) return string_method(object.text, name, args);
    if (object.is_mapping()) return dict_method(object, name, args);
    return list_method(object, name, args);
  });
}

// The Python attribute `name` of `object` (a method), or nothing.
std::optional<Value> python_attribute(const Value& object, const std::string& name) {
  const bool container = object.is_sequence() || object.is_mapping();
  if (container && kMutatingMethods.count(name)) {
    raise("SecurityError", "access to attribute '" + name + "' of '" + object.type_name() + "' object is unsafe.");
  }
  if ((object.is_string() && kStringMethods.count(name)) || (object.is_mapping() && kDictMethods.count(name)) ||
      (object.is_sequence() && kListMethods.count(name))) {
    return bind(object, name);
  }
  return std::nullopt;
}

// A Python index into a sequence of `size`: negative counts from the end; nothing when outside.
std::optional<size_t> sequence_index(int64_t index, size_t size) {
  const int64_t n = static_cast<int64_t>(size);
  if (index < 0) index += n;
  if (index < 0 || index >= n) return std::nullopt;
  return static_cast<size_t>(index);
}

}  // namespace

Value get_attribute(const Value& object, const std::string& name) {
  if (object.kind == Value::Kind::Namespace) {
    const Value* found = object.dict->find(name);
    return found ? *found : Value::undefined("'Namespace' object has no attribute '" + name + "'");
  }
  if (std::optional<Value> method = python_attribute(object, name)) return *method;
  if (object.is_mapping()) {
    const Value* found = object.dict->find(name);
    if (found) return *found;
  }
  return missing_attribute(object, name);
}

Value get_item(const Value& object, const Value& key) {
  if (object.is_mapping() || object.kind == Value::Kind::Namespace) {
    if (const Value* found = object.dict->find(key)) return *found;
  } else if ((object.is_sequence() || object.is_string()) &&
             (key.kind == Value::Kind::Int || key.kind == Value::Kind::Bool)) {
    if (object.is_sequence()) {
      if (auto i = sequence_index(int_argument(key, "index"), object.list->size())) return (*object.list)[*i];
    } else {
      const std::vector<std::string> chars = utf8_characters(object.text);
      if (auto i = sequence_index(int_argument(key, "index"), chars.size())) return Value::string(chars[*i]);
    }
  }
  if (key.is_string()) {
    if (std::optional<Value> method = python_attribute(object, key.text)) return *method;
    return missing_attribute(object, key.text);
  }
  return Value::undefined(object_name(object) + " has no element " + key.repr());
}

Value slice(const Value& object, const Value& start, const Value& stop, const Value& step_value) {
  List items;
  if (object.is_sequence()) items = *object.list;
  else if (object.is_string()) items = object.iterate();
  else raise("TypeError", "'" + object.type_name() + "' object is not subscriptable");
  const int64_t n = static_cast<int64_t>(items.size());
  const int64_t step = step_value.kind == Value::Kind::None ? 1 : int_argument(step_value, "slice step");
  if (step == 0) raise("ValueError", "slice step cannot be zero");
  // Python's slice.indices(): defaults by direction, negatives from the end, then clamped
  auto bound = [&](const Value& v, int64_t fallback) {
    if (v.kind == Value::Kind::None) return fallback;
    int64_t i = int_argument(v, "slice index");
    if (i < 0) i += n;
    return step > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t first = bound(start, step > 0 ? 0 : n - 1);
  const int64_t last = bound(stop, step > 0 ? n : -1);
  List out;
  for (int64_t i = first; step > 0 ? i < last : i > last; i += step) out.push_back(items[static_cast<size_t>(i)]);
  if (!object.is_string()) return Value::make_list(std::move(out), object.tuple);
  std::string text;
  for (const Value& c : out) text += c.text;
  return Value::string(std::move(text));
}

namespace {

// range(stop) / range(start, stop[, step]), at most 100000 items as in jinja2's sandbox.
Value range_global(Arguments& args) {
  int64_t start = 0, stop = 0, step = 1;
  const auto& p = args.positional;
  if (p.size() == 1) {
    stop = int_argument(p[0], "range() argument");
  } else if (p.size() == 2 || p.size() == 3) {
    start = int_argument(p[0], "range() argument");
    stop = int_argument(p[1], "range() argument");
    if (p.size() == 3) step = int_argument(p[2], "range() argument");
  } else {
    raise("TypeError", "range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  }
  if (step == 0) raise("ValueError", "range() arg 3 must not be zero");
  const int64_t count = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                                 : (start > stop ? (start - stop - step - 1) / -step : 0);
  if (count > 100000) raise("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  List items;
  for (int64_t i = 0; i < count; ++i) items.push_back(Value::from_int(start + i * step));
  return Value::make_list(std::move(items));
}

// dict(...) and namespace(...): a mapping from an optional positional mapping and name=value pairs.
Dict keyword_mapping(Arguments& args) {
  Dict d;
  for (const Value& p : args.positional) {
    if (!p.is_mapping()) raise("TypeError", "expected a mapping, got " + p.type_name());
    for (const auto& [key, value] : p.dict->items) d.set(key, value);
  }
  for (const auto& [name, value] : args.named) d.set(Value::string(name), value);
  return d;
}

}  // namespace

void add_globals(std::unordered_map<std::string, Value>& vars) {
  vars["range"] = Value::callable(range_global);
  vars["dict"] = Value::callable([](Arguments& args) { return Value::make_dict(keyword_mapping(args)); });
  vars["namespace"] = Value::callable([](Arguments& args) { return Value::make_namespace(keyword_mapping(args)); });
  vars["raise_exception"] = Value::callable([](Arguments& args) -> Value {
    raise("TemplateError", args.get(0, "message", Value::string("")).str());
  });
}

}  // namespace specula::jinja
