// jinja2's filters and tests that chat templates use, with jinja2's results (and tojson as
// Hugging Face defines it: json.dumps without ASCII escaping).
#include <algorithm>
#include <cmath>
#include <map>

#include "model/chat_template_eval.h"
#include "model/chat_template_text.h"

namespace specula::jinja {

namespace {

using FilterFunction = Value (*)(Evaluator&, const Value&, Arguments&);

Value first_argument(Arguments& args, const char* name, Value fallback = Value::none()) {
  return args.get(0, name, std::move(fallback));
}

// The value at a dotted attribute path ("a.b", "0"), as jinja2's make_attrgetter reads it.
Value attribute_path(const Value& item, const Value& path) {
  if (!path.is_string()) return get_item(item, path);
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.text.find('.', start);
    const std::string part = path.text.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v.is_undefined()) raise_undefined(v);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    v = get_item(v, numeric ? Value::from_int(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

// length / count: characters of a string, items of a list or dict; 0 for undefined.
Value filter_length(Evaluator&, const Value& v, Arguments&) {
  switch (v.kind) {
    case Value::Kind::Undefined: return Value::from_int(0);
    case Value::Kind::String: return Value::from_int(static_cast<int64_t>(utf8_length(v.text)));
    case Value::Kind::List: return Value::from_int(static_cast<int64_t>(v.list->size()));
    case Value::Kind::Dict: case Value::Kind::Namespace: return Value::from_int(static_cast<int64_t>(v.dict->items.size()));
    default: raise("TypeError", "object of type '" + v.type_name() + "' has no len()");
  }
}

Value filter_tojson(Evaluator& evaluator, const Value& v, Arguments& args) {
  JsonStyle style;
  const Value indent = args.get(SIZE_MAX, "indent");
  if (indent.kind == Value::Kind::Int) {
    style.indent = static_cast<int>(std::max<int64_t>(0, indent.integer));
    style.item_separator = ",";
  } else if (indent.kind != Value::Kind::None) {
    raise("TypeError", "tojson: indent must be an integer or None");
  }
  const Value separators = args.get(SIZE_MAX, "separators");
  if (separators.is_sequence() && separators.list->size() == 2) {
    style.item_separator = (*separators.list)[0].str();
    style.key_separator = (*separators.list)[1].str();
  }
  style.sort_keys = args.get(SIZE_MAX, "sort_keys", Value::from_bool(false)).truthy();
  std::string json = to_json(v, style);
  evaluator.check_size(json.size());
  return Value::string(std::move(json));
}

Value filter_default(Evaluator&, const Value& v, Arguments& args) {
  const bool boolean = args.get(1, "boolean", Value::from_bool(false)).truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return args.get(0, "default_value", Value::string(""));
  return v;
}

Value filter_join(Evaluator& evaluator, const Value& v, Arguments& args) {
  const std::string separator = args.get(0, "d", Value::string("")).str();
  const Value attribute = args.get(1, "attribute");
  std::string out;
  const List items = v.iterate();
  for (size_t i = 0; i < items.size(); ++i) {
    out += (i ? separator : "") + (attribute.kind == Value::Kind::None ? items[i] : attribute_path(items[i], attribute)).str();
    evaluator.check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value filter_trim(Evaluator&, const Value& v, Arguments& args) {
  const Value chars = first_argument(args, "chars");
  return Value::string(python_strip(v.str(), chars.is_string() ? std::optional(chars.text) : std::nullopt, StripSide::Both));
}

Value filter_replace(Evaluator& evaluator, const Value& v, Arguments& args) {
  const Value count = args.get(2, "count");
  std::string out = python_replace(v.str(), args.get(0, "old").str(), args.get(1, "new").str(),
                                   count.kind == Value::Kind::Int ? count.integer : -1);
  evaluator.check_size(out.size());
  return Value::string(std::move(out));
}

Value filter_items(Evaluator&, const Value& v, Arguments&) {
  if (v.is_undefined()) return Value::make_list({});
  if (!v.is_mapping()) raise("TypeError", "Can only get item pairs from a mapping.");
  List pairs;
  for (const auto& [key, value] : v.dict->items) pairs.push_back(Value::make_list({key, value}, true));
  return Value::make_list(std::move(pairs));
}

Value filter_first(Evaluator&, const Value& v, Arguments&) {
  const List items = v.iterate();
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value filter_last(Evaluator&, const Value& v, Arguments&) {
  const List items = v.iterate();
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

// The key unique/sort/min/max compare by: lower-cased text unless case_sensitive.
Value comparison_key(const Value& item, const Value& attribute, bool case_sensitive) {
  Value key = attribute.kind == Value::Kind::None ? item : attribute_path(item, attribute);
  if (!case_sensitive && key.is_string()) key = Value::string(python_lower(key.text));
  return key;
}

Value filter_unique(Evaluator&, const Value& v, Arguments& args) {
  const bool case_sensitive = args.get(0, "case_sensitive", Value::from_bool(false)).truthy();
  const Value attribute = args.get(1, "attribute");
  List out, seen;
  for (const Value& item : v.iterate()) {
    const Value key = comparison_key(item, attribute, case_sensitive);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::make_list(std::move(out));
}

Value filter_sort(Evaluator&, const Value& v, Arguments& args) {
  const bool reverse = args.get(0, "reverse", Value::from_bool(false)).truthy();
  const bool case_sensitive = args.get(1, "case_sensitive", Value::from_bool(false)).truthy();
  const Value attribute = args.get(2, "attribute");
  List items = v.iterate();
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int c = compare(comparison_key(a, attribute, case_sensitive), comparison_key(b, attribute, case_sensitive), "<");
    return reverse ? c > 0 : c < 0;
  });
  return Value::make_list(std::move(items));
}

Value extreme(const Value& v, Arguments& args, bool want_max) {
  const bool case_sensitive = args.get(0, "case_sensitive", Value::from_bool(false)).truthy();
  const Value attribute = args.get(1, "attribute");
  const List items = v.iterate();
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  const Value* best = &items[0];
  for (const Value& item : items) {
    const int c = compare(comparison_key(item, attribute, case_sensitive), comparison_key(*best, attribute, case_sensitive), "<");
    if (want_max ? c > 0 : c < 0) best = &item;
  }
  return *best;
}

Value filter_max(Evaluator&, const Value& v, Arguments& args) { return extreme(v, args, true); }
Value filter_min(Evaluator&, const Value& v, Arguments& args) { return extreme(v, args, false); }

Value filter_sum(Evaluator& evaluator, const Value& v, Arguments& args) {
  const Value attribute = args.get(0, "attribute");
  Value total = args.get(1, "start", Value::from_int(0));
  for (const Value& item : v.iterate()) {
    total = binary_operation("+", total, attribute.kind == Value::Kind::None ? item : attribute_path(item, attribute), evaluator);
  }
  return total;
}

// jinja2's select, reject and map visit nothing when the value is false (none, "", []).
List truthy_items(const Value& v) { return v.truthy() ? v.iterate() : List{}; }

// select / reject / selectattr / rejectattr: items whose value passes (or fails) a test;
// without a test, the value's truth.
Value select_items(Evaluator& evaluator, const Value& v, Arguments& args, bool by_attribute, bool keep_passing) {
  const size_t test_at = by_attribute ? 1 : 0;
  const Value attribute = by_attribute ? args.get(0, "\x01") : Value::none();
  Arguments test_args;
  for (size_t i = test_at + 1; i < args.positional.size(); ++i) test_args.positional.push_back(args.positional[i]);
  List out;
  for (const Value& item : truthy_items(v)) {
    const Value subject = by_attribute ? attribute_path(item, attribute) : item;
    Arguments a = test_args;
    const bool passes = args.positional.size() > test_at ? apply_test(evaluator, args.positional[test_at].str(), subject, a)
                                                         : subject.truthy();
    if (passes == keep_passing) out.push_back(item);
  }
  return Value::make_list(std::move(out));
}

Value filter_select(Evaluator& e, const Value& v, Arguments& a) { return select_items(e, v, a, false, true); }
Value filter_reject(Evaluator& e, const Value& v, Arguments& a) { return select_items(e, v, a, false, false); }
Value filter_selectattr(Evaluator& e, const Value& v, Arguments& a) { return select_items(e, v, a, true, true); }
Value filter_rejectattr(Evaluator& e, const Value& v, Arguments& a) { return select_items(e, v, a, true, false); }

// map(attribute="x", default=...) or map("filter", args...).
Value filter_map(Evaluator& evaluator, const Value& v, Arguments& args) {
  List out;
  const Value attribute = args.get(SIZE_MAX, "attribute");
  for (const Value& item : truthy_items(v)) {
    if (attribute.kind != Value::Kind::None) {
      Value mapped = attribute_path(item, attribute);
      if (mapped.is_undefined() && args.has(SIZE_MAX, "default")) mapped = args.get(SIZE_MAX, "default");
      out.push_back(std::move(mapped));
      continue;
    }
    if (args.positional.empty()) raise("FilterArgumentError", "map requires a filter argument");
    Arguments filter_args;
    filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
    filter_args.named = args.named;
    out.push_back(apply_filter(evaluator, args.positional[0].str(), item, filter_args));
  }
  return Value::make_list(std::move(out));
}

Value filter_list(Evaluator&, const Value& v, Arguments&) { return Value::make_list(v.iterate()); }
Value filter_string(Evaluator&, const Value& v, Arguments&) { return Value::string(v.str()); }
Value filter_upper(Evaluator&, const Value& v, Arguments&) { return Value::string(python_upper(v.str())); }
Value filter_lower(Evaluator&, const Value& v, Arguments&) { return Value::string(python_lower(v.str())); }
Value filter_title(Evaluator&, const Value& v, Arguments&) { return Value::string(python_title(v.str())); }
Value filter_capitalize(Evaluator&, const Value& v, Arguments&) { return Value::string(python_capitalize(v.str())); }
Value filter_safe(Evaluator&, const Value& v, Arguments&) { return v; }

Value filter_escape(Evaluator&, const Value& v, Arguments&) {
  std::string out;
  for (const char c : v.str()) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value::string(std::move(out));
}

Value filter_reverse(Evaluator&, const Value& v, Arguments&) {
  if (v.is_string()) {
    std::vector<std::string> chars = utf8_characters(v.text);
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
    return Value::string(std::move(out));
  }
  List items = v.iterate();
  std::reverse(items.begin(), items.end());
  return Value::make_list(std::move(items));
}

// int: numbers truncate, text parses (as an int, else as a float), else the default.
Value filter_int(Evaluator&, const Value& v, Arguments& args) {
  const Value fallback = args.get(0, "default", Value::from_int(0));
  if (v.kind == Value::Kind::Int || v.kind == Value::Kind::Bool) return Value::from_int(v.kind == Value::Kind::Bool ? v.boolean : v.integer);
  if (v.kind == Value::Kind::Float) return std::isfinite(v.real) ? Value::from_int(static_cast<int64_t>(v.real)) : fallback;
  if (!v.is_string()) return fallback;
  const std::string t = python_strip(v.text, std::nullopt, StripSide::Both);
  try {
    size_t used = 0;
    const int64_t i = std::stoll(t, &used);
    if (used == t.size()) return Value::from_int(i);
    const double d = std::stod(t, &used);
    if (used == t.size() && std::isfinite(d)) return Value::from_int(static_cast<int64_t>(d));
  } catch (const std::exception&) {
  }
  return fallback;
}

Value filter_float(Evaluator&, const Value& v, Arguments& args) {
  const Value fallback = args.get(0, "default", Value::from_float(0.0));
  if (v.is_number()) return Value::from_float(v.as_double());
  if (!v.is_string()) return fallback;
  const std::string t = python_strip(v.text, std::nullopt, StripSide::Both);
  try {
    size_t used = 0;
    const double d = std::stod(t, &used);
    if (used == t.size()) return Value::from_float(d);
  } catch (const std::exception&) {
  }
  return fallback;
}

Value filter_abs(Evaluator&, const Value& v, Arguments&) {
  if (v.kind == Value::Kind::Float) return Value::from_float(std::fabs(v.real));
  if (v.kind == Value::Kind::Int) return Value::from_int(v.integer < 0 ? -v.integer : v.integer);
  if (v.kind == Value::Kind::Bool) return Value::from_int(v.boolean);
  raise("TypeError", "bad operand type for abs(): '" + v.type_name() + "'");
}

Value filter_round(Evaluator&, const Value& v, Arguments& args) {
  const int64_t precision = args.get(0, "precision", Value::from_int(0)).integer;
  const std::string method = args.get(1, "method", Value::string("common")).str();
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);  // Python rounds halves to even
  return Value::from_float(r / scale);
}

// indent(width=4, first=False, blank=False): lines after the first (or all) get the indent;
// empty lines only when blank.
Value filter_indent(Evaluator& evaluator, const Value& v, Arguments& args) {
  const Value width = args.get(0, "width", Value::from_int(4));
  const std::string indentation = width.is_string() ? width.text : std::string(static_cast<size_t>(std::max<int64_t>(0, width.integer)), ' ');
  const bool first = args.get(1, "first", Value::from_bool(false)).truthy();
  const bool blank = args.get(2, "blank", Value::from_bool(false)).truthy();
  std::vector<std::string> lines = python_split(python_replace(v.str(), "\r\n", "\n", -1) + "\n", std::string("\n"), -1);
  lines.pop_back();  // the piece after the added newline
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n";
    if (i && (blank || !lines[i].empty())) out += indentation;
    out += lines[i];
    evaluator.check_size(out.size());
  }
  if (first) out = indentation + out;
  return Value::string(std::move(out));
}

Value filter_attr(Evaluator&, const Value& v, Arguments& args) { return get_attribute(v, first_argument(args, "name").str()); }

Value filter_wordcount(Evaluator&, const Value& v, Arguments&) {
  return Value::from_int(static_cast<int64_t>(python_split(v.str(), std::nullopt, -1).size()));
}

Value filter_dictsort(Evaluator& evaluator, const Value& v, Arguments& args) {
  const bool case_sensitive = args.get(0, "case_sensitive", Value::from_bool(false)).truthy();
  const bool by_value = args.get(1, "by", Value::string("key")).str() == "value";
  const bool reverse = args.get(2, "reverse", Value::from_bool(false)).truthy();
  List pairs = *filter_items(evaluator, v, args).list;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
    const Value none = Value::none();
    const int c = compare(comparison_key((*a.list)[by_value], none, case_sensitive), comparison_key((*b.list)[by_value], none, case_sensitive), "<");
    return reverse ? c > 0 : c < 0;
  });
  return Value::make_list(std::move(pairs));
}

// printf-style "%s %d" formatting, the `format` filter's: %s, %r, %d, %i, %f and %%.
Value filter_format(Evaluator&, const Value& v, Arguments& args) {
  const std::string pattern = v.str();
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 >= pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char spec = pattern[++i];
    if (spec == '%') {
      out += '%';
      continue;
    }
    if (next >= args.positional.size()) raise("TypeError", "not enough arguments for format string");
    const Value& a = args.positional[next++];
    if (spec == 's') out += a.str();
    else if (spec == 'r') out += a.repr();
    else if (spec == 'd' || spec == 'i') out += std::to_string(static_cast<int64_t>(a.as_double()));
    else if (spec == 'f') out += std::to_string(a.as_double());
    else raise("ValueError", std::string("unsupported format character '") + spec + "'");
  }
  return Value::string(std::move(out));
}

const std::map<std::string, FilterFunction>& filters() {
  static const std::map<std::string, FilterFunction> table = {
      {"abs", filter_abs}, {"attr", filter_attr}, {"capitalize", filter_capitalize}, {"count", filter_length},
      {"d", filter_default}, {"default", filter_default}, {"dictsort", filter_dictsort}, {"e", filter_escape},
      {"escape", filter_escape}, {"first", filter_first}, {"float", filter_float}, {"format", filter_format},
      {"indent", filter_indent}, {"int", filter_int}, {"items", filter_items}, {"join", filter_join},
      {"last", filter_last}, {"length", filter_length}, {"list", filter_list}, {"lower", filter_lower},
      {"map", filter_map}, {"max", filter_max}, {"min", filter_min}, {"reject", filter_reject},
      {"rejectattr", filter_rejectattr}, {"replace", filter_replace}, {"reverse", filter_reverse},
      {"round", filter_round}, {"safe", filter_safe}, {"select", filter_select}, {"selectattr", filter_selectattr},
      {"sort", filter_sort}, {"string", filter_string}, {"sum", filter_sum}, {"title", filter_title},
      {"tojson", filter_tojson}, {"trim", filter_trim}, {"unique", filter_unique}, {"upper", filter_upper},
      {"wordcount", filter_wordcount},
  };
  return table;
}

// ---- tests ----

bool is_integer(const Value& v) { return v.kind == Value::Kind::Int; }

bool test_value(Evaluator& evaluator, const std::string& name, const Value& v, Arguments& args) {
  const Value other = args.get(0, "\x01");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.kind == Value::Kind::None;
  if (name == "boolean") return v.kind == Value::Kind::Bool;
  if (name == "true") return v.kind == Value::Kind::Bool && v.boolean;
  if (name == "false") return v.kind == Value::Kind::Bool && !v.boolean;
  if (name == "integer") return is_integer(v);
  if (name == "float") return v.kind == Value::Kind::Float;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_mapping();
  if (name == "iterable") return v.is_undefined() || v.is_string() || v.is_sequence() || v.is_mapping();
  if (name == "sequence") return v.is_undefined() || v.is_string() || v.is_sequence() || v.is_mapping();
  if (name == "callable") return v.kind == Value::Kind::Callable;
  if (name == "odd" || name == "even") {
    const Value m = binary_operation("%", v, Value::from_int(2), evaluator);
    return (m.as_double() != 0) == (name == "odd");
  }
  if (name == "divisibleby") return binary_operation("%", v, other, evaluator).as_double() == 0;
  if (name == "lower") return v.str() == python_lower(v.str());
  if (name == "upper") return v.str() == python_upper(v.str());
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, other);
  if (name == "ne" || name == "!=") return !equals(v, other);
  if (name == "sameas") return equals(v, other) && v.kind == other.kind;
  if (name == "in") return contains(other, v);
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, other, "<") < 0;
  if (name == "le" || name == "<=") return compare(v, other, "<=") <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, other, ">") > 0;
  if (name == "ge" || name == ">=") return compare(v, other, ">=") >= 0;
  if (name == "filter") return filters().count(v.str()) > 0;
  if (name == "test") {
    static const char* const names[] = {"defined", "undefined", "none", "boolean", "true", "false", "integer", "float",
                                        "number", "string", "mapping", "iterable", "sequence", "callable", "odd", "even",
                                        "divisibleby", "lower", "upper", "eq", "equalto", "ne", "sameas", "in", "lt",
                                        "le", "gt", "ge", "filter", "test", "escaped"};
    return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return v.str() == n; });
  }
  if (name == "escaped") return false;
  raise("TemplateRuntimeError", "No test named '" + name + "'.");
}

}  // namespace

Value apply_filter(Evaluator& evaluator, const std::string& name, const Value& input, Arguments& args) {
  const auto& table = filters();
  const auto it = table.find(name);
  if (it == table.end()) raise("TemplateRuntimeError", "No filter named '" + name + "'.");
  return it->second(evaluator, input, args);
}

bool apply_test(Evaluator& evaluator, const std::string& name, const Value& input, Arguments& args) {
  return test_value(evaluator, name, input, args);
}

}  // namespace specula::jinja
