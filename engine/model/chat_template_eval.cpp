// The chat-template evaluator: statements to text, expressions to values, with jinja2's
// scoping (a loop iteration and a macro call each get their own variables; `set` inside a
// loop does not reach outside it, which is what namespace() is for) and the limits of
// ChatTemplateLimits checked as it goes.
#include "model/chat_template_eval.h"

#include <cmath>

#include "model/chat_template_text.h"

namespace specula::jinja {

Evaluator::Evaluator(const ChatTemplateLimits& limits, Value variables) : limits_(limits) {
  add_globals(root_.vars);
  if (variables.is_mapping()) {
    for (const auto& [key, value] : variables.dict->items) root_.vars[key.str()] = value;
  }
}

std::string Evaluator::render(const Body& body) {
  std::string out;
  execute(body, out);
  return out;
}

void Evaluator::check_size(size_t size) const {
  if (size > limits_.max_output_bytes) {
    raise("TemplateLimitError", "the template builds text or a list beyond " + std::to_string(limits_.max_output_bytes) +
                                    " bytes or items");
  }
}

void Evaluator::append(std::string& out, const std::string& text) const {
  check_size(out.size() + text.size());
  out += text;
}

void Evaluator::count_iteration() {
  if (++iterations_ > limits_.max_loop_iterations) {
    raise("TemplateLimitError", "the template loops more than " + std::to_string(limits_.max_loop_iterations) + " times");
  }
}

Evaluator::Deeper::Deeper(Evaluator& evaluator) : e(evaluator) {
  if (++e.render_depth_ > e.limits_.max_render_depth) {
    --e.render_depth_;
    raise("TemplateLimitError", "the template evaluates deeper than " + std::to_string(e.limits_.max_render_depth) +
                                    " levels (recursion through macros)");
  }
}

Value Evaluator::lookup(const std::string& name) const {
  for (const Scope* s = scope_; s; s = s->parent) {
    const auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  return Value::undefined("'" + name + "' is undefined");
}

// ---- statements ----

Evaluator::Flow Evaluator::execute(const Body& body, std::string& out) {
  for (const auto& node : body) {
    const Flow flow = execute(*node, out);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Evaluator::Flow Evaluator::execute(const Node& node, std::string& out) {
  const Deeper deeper(*this);
  switch (node.kind) {
    case Node::Kind::Text: append(out, node.text); return Flow::Normal;
    case Node::Kind::Output: append(out, eval(*node.expr).str()); return Flow::Normal;
    case Node::Kind::If: return execute_if(node, out);
    case Node::Kind::For: return execute_for(node, out);
    case Node::Kind::Set: case Node::Kind::SetBlock: execute_set(node); return Flow::Normal;
    case Node::Kind::Macro: define_macro(node); return Flow::Normal;
    case Node::Kind::FilterBlock:
      append(out, eval_filter_chain(*node.filter, Value::string(render_capture(node.body))).str());
      return Flow::Normal;
    case Node::Kind::Break: return Flow::Break;
    case Node::Kind::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

Evaluator::Flow Evaluator::execute_if(const Node& node, std::string& out) {
  for (const IfBranch& branch : node.branches) {
    if (eval(*branch.condition).truthy()) return execute(branch.body, out);
  }
  return execute(node.else_body, out);
}

void Evaluator::bind_targets(const std::vector<std::string>& targets, const Value& item) {
  if (targets.size() == 1) {
    assign(targets[0], item);
    return;
  }
  const List values = item.iterate();
  if (values.size() != targets.size()) {
    raise("ValueError", values.size() > targets.size()
                            ? "too many values to unpack (expected " + std::to_string(targets.size()) + ")"
                            : "not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                                  std::to_string(values.size()) + ")");
  }
  for (size_t i = 0; i < targets.size(); ++i) assign(targets[i], values[i]);
}

namespace {

// jinja2's `loop` object for the item at `index` of `items`.
Value loop_object(const List& items, size_t index) {
  const auto n = static_cast<int64_t>(items.size());
  const auto i = static_cast<int64_t>(index);
  Dict loop;
  loop.set(Value::string("index"), Value::from_int(i + 1));
  loop.set(Value::string("index0"), Value::from_int(i));
  loop.set(Value::string("revindex"), Value::from_int(n - i));
  loop.set(Value::string("revindex0"), Value::from_int(n - i - 1));
  loop.set(Value::string("first"), Value::from_bool(i == 0));
  loop.set(Value::string("last"), Value::from_bool(i == n - 1));
  loop.set(Value::string("length"), Value::from_int(n));
  loop.set(Value::string("depth"), Value::from_int(1));
  loop.set(Value::string("depth0"), Value::from_int(0));
  loop.set(Value::string("previtem"), i > 0 ? items[index - 1] : Value::undefined("there is no previous item"));
  loop.set(Value::string("nextitem"), i + 1 < n ? items[index + 1] : Value::undefined("there is no next item"));
  loop.set(Value::string("cycle"), Value::callable([i](Arguments& args) {
    if (args.positional.empty()) raise("TypeError", "no items for cycling given");
    return args.positional[static_cast<size_t>(i) % args.positional.size()];
  }));
  return Value::make_dict(std::move(loop));
}

}  // namespace

Evaluator::Flow Evaluator::execute_for(const Node& node, std::string& out) {
  const Value iterable = eval(*node.expr);
  List items = iterable.iterate();
  Scope loop_scope{.parent = scope_};
  if (node.condition) {  // `for x in xs if c`: the loop sees only the items that pass
    List kept;
    for (const Value& item : items) {
      count_iteration();
      loop_scope.vars.clear();
      scope_ = &loop_scope;
      bind_targets(node.targets, item);
      const bool keep = eval(*node.condition).truthy();
      scope_ = loop_scope.parent;
      if (keep) kept.push_back(item);
    }
    items = std::move(kept);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    count_iteration();
    loop_scope.vars.clear();  // each iteration starts afresh, as in jinja2
    loop_scope.vars["loop"] = loop_object(items, i);
    scope_ = &loop_scope;
    Flow flow = Flow::Normal;
    try {
      bind_targets(node.targets, items[i]);
      flow = execute(node.body, out);
    } catch (...) {
      scope_ = loop_scope.parent;
      throw;
    }
    scope_ = loop_scope.parent;
    if (flow == Flow::Break) break;
  }
  if (items.empty()) return execute(node.else_body, out);
  return Flow::Normal;
}

void Evaluator::execute_set(const Node& node) {
  Value value;
  if (node.kind == Node::Kind::SetBlock) {
    value = Value::string(render_capture(node.body));
    if (node.filter) value = eval_filter_chain(*node.filter, value);
  } else {
    value = eval(*node.expr);
  }
  if (node.attribute.empty()) {
    bind_targets(node.targets, value);
    return;
  }
  const Value target = lookup(node.targets[0]);
  if (target.kind != Value::Kind::Namespace) raise("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
  target.dict->set(Value::string(node.attribute), std::move(value));
}

std::string Evaluator::render_capture(const Body& body) {
  std::string out;
  execute(body, out);
  return out;
}

void Evaluator::define_macro(const Node& node) {
  const Node* macro = &node;
  assign(node.name, Value::callable([this, macro](Arguments& args) { return call_macro(*macro, args); }));
}

// A macro runs in its own variables over the template's top level; parameters not given
// take their defaults, or are undefined.
Value Evaluator::call_macro(const Node& macro, Arguments& args) {
  if (args.positional.size() > macro.parameters.size()) {
    raise("TypeError", "macro '" + macro.name + "' takes not more than " + std::to_string(macro.parameters.size()) +
                           " argument(s)");
  }
  for (const auto& [name, value] : args.named) {
    bool known = false;
    for (const MacroParameter& p : macro.parameters) known = known || p.name == name;
    if (!known) raise("TypeError", "macro '" + macro.name + "' takes no keyword argument '" + name + "'");
  }
  if (call_depth_ >= limits_.max_call_depth) {
    raise("TemplateLimitError", "macro calls nest deeper than " + std::to_string(limits_.max_call_depth) + " (in '" +
                                    macro.name + "')");
  }
  Scope call_scope{.parent = &root_};
  Scope* const caller_scope = scope_;
  ++call_depth_;
  scope_ = &call_scope;
  try {
    for (size_t i = 0; i < macro.parameters.size(); ++i) {
      const MacroParameter& p = macro.parameters[i];
      Value value = args.has(i, p.name) ? args.get(i, p.name)
                    : p.default_value   ? eval(*p.default_value)
                                        : Value::undefined("parameter '" + p.name + "' was not provided");
      assign(p.name, std::move(value));
    }
    std::string out = render_capture(macro.body);
    scope_ = caller_scope;
    --call_depth_;
    return Value::string(std::move(out));
  } catch (...) {
    scope_ = caller_scope;
    --call_depth_;
    throw;
  }
}

// ---- expressions ----

Value Evaluator::eval(const Expr& e) {
  const Deeper deeper(*this);
  switch (e.kind) {
    case Expr::Kind::Literal: return e.value;
    case Expr::Kind::Name: return lookup(e.name);
    case Expr::Kind::List: case Expr::Kind::Tuple: {
      List items;
      for (const auto& child : e.children) items.push_back(eval(*child));
      return Value::make_list(std::move(items), e.kind == Expr::Kind::Tuple);
    }
    case Expr::Kind::Dict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) d.set(eval(*e.children[i]), eval(*e.children[i + 1]));
      return Value::make_dict(std::move(d));
    }
    case Expr::Kind::Attribute: return eval_attribute(e);
    case Expr::Kind::Subscript: return eval_subscript(e);
    case Expr::Kind::Slice: return eval_slice(e);
    case Expr::Kind::Call: return eval_call(e);
    case Expr::Kind::Filter: return eval_filter(e, eval(*e.children[0]));
    case Expr::Kind::Test: return eval_test(e);
    case Expr::Kind::Unary: return eval_unary(e);
    case Expr::Kind::Binary: return eval_binary(e);
    case Expr::Kind::Compare: return eval_compare(e);
    case Expr::Kind::And: {
      Value left = eval(*e.children[0]);
      return left.truthy() ? eval(*e.children[1]) : left;
    }
    case Expr::Kind::Or: {
      Value left = eval(*e.children[0]);
      return left.truthy() ? left : eval(*e.children[1]);
    }
    case Expr::Kind::Conditional:
      if (eval(*e.children[1]).truthy()) return eval(*e.children[0]);
      if (e.children[2]) return eval(*e.children[2]);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
  }
  return Value::none();
}

Value Evaluator::eval_attribute(const Expr& e) {
  const Value object = eval(*e.children[0]);
  if (object.is_undefined()) raise_undefined(object);
  return get_attribute(object, e.name);
}

Value Evaluator::eval_subscript(const Expr& e) {
  const Value object = eval(*e.children[0]);
  if (object.is_undefined()) raise_undefined(object);
  return get_item(object, eval(*e.children[1]));
}

Value Evaluator::eval_slice(const Expr& e) {
  const Value object = eval(*e.children[0]);
  if (object.is_undefined()) raise_undefined(object);
  auto part = [&](size_t i) { return e.children[i] ? eval(*e.children[i]) : Value::none(); };
  return slice(object, part(1), part(2), part(3));
}

Arguments Evaluator::eval_arguments(const Expr& e, size_t first) {
  Arguments args;
  for (size_t i = first; i < e.children.size(); ++i) {
    const std::string& name = e.arg_names[i - first];
    if (name.empty()) {
      if (!args.named.empty()) raise("TemplateSyntaxError", "positional argument follows keyword argument");
      args.positional.push_back(eval(*e.children[i]));
    } else {
      args.named.emplace_back(name, eval(*e.children[i]));
    }
  }
  return args;
}

Value Evaluator::call(const Value& callee, Arguments& args) {
  if (callee.is_undefined()) raise_undefined(callee);
  if (callee.kind != Value::Kind::Callable) raise("TypeError", "'" + callee.type_name() + "' object is not callable");
  return (*callee.function)(args);
}

Value Evaluator::eval_call(const Expr& e) {
  const Value callee = eval(*e.children[0]);
  Arguments args = eval_arguments(e, 1);
  return call(callee, args);
}

Value Evaluator::eval_filter(const Expr& filter, const Value& operand) {
  Arguments args = eval_arguments(filter, 1);
  return apply_filter(*this, filter.name, operand, args);
}

// A filter block's chain (`{% filter a | b %}`): the innermost filter, whose operand is
// null, takes the block's text.
Value Evaluator::eval_filter_chain(const Expr& filter, const Value& input) {
  const Value operand = filter.children[0] ? eval_filter_chain(*filter.children[0], input) : input;
  return eval_filter(filter, operand);
}

Value Evaluator::eval_test(const Expr& e) {
  const Value operand = eval(*e.children[0]);
  Arguments args = eval_arguments(e, 1);
  const bool result = apply_test(*this, e.name, operand, args);
  return Value::from_bool(result != e.negated);
}

Value Evaluator::eval_unary(const Expr& e) {
  const Value operand = eval(*e.children[0]);
  if (e.name == "not") return Value::from_bool(!operand.truthy());
  if (operand.is_undefined()) raise_undefined(operand);
  if (!operand.is_number()) raise("TypeError", "bad operand type for unary " + e.name + ": '" + operand.type_name() + "'");
  if (e.name == "+") return operand.kind == Value::Kind::Bool ? Value::from_int(operand.boolean) : operand;
  if (operand.kind == Value::Kind::Float) return Value::from_float(-operand.real);
  return Value::from_int(-(operand.kind == Value::Kind::Bool ? int64_t{operand.boolean} : operand.integer));
}

Value Evaluator::eval_binary(const Expr& e) {
  const Value left = eval(*e.children[0]);
  const Value right = eval(*e.children[1]);
  return binary_operation(e.name, left, right, *this);
}

Value Evaluator::eval_compare(const Expr& e) {
  Value left = eval(*e.children[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.children[i + 1]);
    const std::string& op = e.ops[i];
    bool holds;
    if (op == "==") holds = equals(left, right);
    else if (op == "!=") holds = !equals(left, right);
    else if (op == "in") holds = contains(right, left);
    else if (op == "not in") holds = !contains(right, left);
    else {
      const int c = compare(left, right, op.c_str());
      holds = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!holds) return Value::from_bool(false);
    left = std::move(right);
  }
  return Value::from_bool(true);
}

// ---- operators ----

namespace {

int64_t as_int(const Value& v) { return v.kind == Value::Kind::Bool ? v.boolean : v.integer; }

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  if (op == "+" && (a.is_string() || a.is_sequence())) {
    raise("TypeError", "can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " + a.type_name());
  }
  raise("TypeError", "unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

// Python's ints do not overflow; ours stop with an error rather than wrap.
void check_overflow(bool overflowed) {
  if (overflowed) raise("OverflowError", "integer result too large");
}

Value integer_operation(const std::string& op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op == "+" || op == "-" || op == "*") {
    check_overflow(op == "+" ? __builtin_add_overflow(x, y, &r) : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                                                            : __builtin_mul_overflow(x, y, &r));
    return Value::from_int(r);
  }
  if (op == "/") {
    if (y == 0) raise("ZeroDivisionError", "division by zero");
    return Value::from_float(static_cast<double>(x) / static_cast<double>(y));
  }
  if (y == 0 && (op == "//" || op == "%")) raise("ZeroDivisionError", "integer division or modulo by zero");
  if (op == "//" || op == "%") {  // Python rounds the quotient down; the remainder takes the divisor's sign
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      --q;
      m += y;
    }
    return Value::from_int(op == "//" ? q : m);
  }
  // **: a negative exponent gives a float, as in Python
  if (y < 0) return Value::from_float(std::pow(static_cast<double>(x), static_cast<double>(y)));
  int64_t result = 1;
  for (int64_t i = 0; i < y && result != 0; ++i) check_overflow(__builtin_mul_overflow(result, x, &result));
  return Value::from_int(result);
}

Value float_operation(const std::string& op, double x, double y) {
  if (op == "+") return Value::from_float(x + y);
  if (op == "-") return Value::from_float(x - y);
  if (op == "*") return Value::from_float(x * y);
  if (op == "**") return Value::from_float(std::pow(x, y));
  if (y == 0) raise("ZeroDivisionError", op == "/" ? "float division by zero" : "float modulo");
  if (op == "/") return Value::from_float(x / y);
  if (op == "//") return Value::from_float(std::floor(x / y));
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  return Value::from_float(m);
}

// "ab" * 3, [1] * 3 (and 3 * "ab"): the repeated value, within the size limit.
Value repeat(const Value& sequence, int64_t times, const Evaluator& evaluator) {
  const size_t n = times > 0 ? static_cast<size_t>(times) : 0;
  if (sequence.is_string()) {
    evaluator.check_size(sequence.text.size() * n);
    std::string out;
    for (size_t i = 0; i < n; ++i) out += sequence.text;
    return Value::string(std::move(out));
  }
  evaluator.check_size(sequence.list->size() * n);
  List out;
  for (size_t i = 0; i < n; ++i) out.insert(out.end(), sequence.list->begin(), sequence.list->end());
  return Value::make_list(std::move(out), sequence.tuple);
}

}  // namespace

Value binary_operation(const std::string& op, const Value& a, const Value& b, const Evaluator& evaluator) {
  if (op == "~") {
    evaluator.check_size(a.str().size() + b.str().size());
    return Value::string(a.str() + b.str());
  }
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  const bool a_int = a.kind == Value::Kind::Int || a.kind == Value::Kind::Bool;
  const bool b_int = b.kind == Value::Kind::Int || b.kind == Value::Kind::Bool;
  if (a_int && b_int) return integer_operation(op, as_int(a), as_int(b));
  if (a.is_number() && b.is_number()) return float_operation(op, a.as_double(), b.as_double());
  if (op == "+" && a.is_string() && b.is_string()) {
    evaluator.check_size(a.text.size() + b.text.size());
    return Value::string(a.text + b.text);
  }
  if (op == "+" && a.is_sequence() && b.is_sequence() && a.tuple == b.tuple) {
    evaluator.check_size(a.list->size() + b.list->size());
    List items = *a.list;
    items.insert(items.end(), b.list->begin(), b.list->end());
    return Value::make_list(std::move(items), a.tuple);
  }
  if (op == "*" && (a.is_string() || a.is_sequence()) && b_int) return repeat(a, as_int(b), evaluator);
  if (op == "*" && a_int && (b.is_string() || b.is_sequence())) return repeat(b, as_int(a), evaluator);
  unsupported(op, a, b);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Value::Kind::Undefined: return false;  // iterates as empty
    case Value::Kind::String:
      if (!item.is_string()) raise("TypeError", "'in <string>' requires string as left operand, not " + item.type_name());
      return container.text.find(item.text) != std::string::npos;
    case Value::Kind::List:
      for (const Value& v : *container.list) if (equals(v, item)) return true;
      return false;
    case Value::Kind::Dict: return container.dict->find(item) != nullptr;
    default: raise("TypeError", "argument of type '" + container.type_name() + "' is not iterable");
  }
}

}  // namespace specula::jinja
