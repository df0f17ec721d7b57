// The chat-template evaluator: runs the parsed statements against variables, producing text,
// and evaluates expressions. One Evaluator per render. Internal to the renderer; the
// filters, tests and methods it calls are in chat_template_builtins.cpp.
#pragma once

#include <string>
#include <unordered_map>

#include "model/chat_template_ast.h"

namespace specula::jinja {

class Evaluator {
 public:
  Evaluator(const ChatTemplateLimits& limits, Value variables);

  std::string render(const Body& body);

  Value eval(const Expr& e);
  Value call(const Value& callee, Arguments& args);
  // A string or list about to be built with `size` bytes or items: TemplateLimitError when too large.
  void check_size(size_t size) const;

 private:
  // Variables of one level: the template's top level, a loop iteration or a macro call.
  struct Scope {
    std::unordered_map<std::string, Value> vars;
    Scope* parent = nullptr;
  };
  enum class Flow { Normal, Break, Continue };

  const ChatTemplateLimits& limits_;
  Scope root_;
  Scope* scope_ = &root_;
  int call_depth_ = 0;
  int render_depth_ = 0;

  // Counts one level of evaluation for as long as it lives (max_render_depth).
  struct Deeper {
    Evaluator& e;
    explicit Deeper(Evaluator& evaluator);
    ~Deeper() { --e.render_depth_; }
  };
  size_t iterations_ = 0;

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value value) { scope_->vars[name] = std::move(value); }
  void append(std::string& out, const std::string& text) const;

  Flow execute(const Body& body, std::string& out);
  Flow execute(const Node& node, std::string& out);
  Flow execute_if(const Node& node, std::string& out);
  Flow execute_for(const Node& node, std::string& out);
  void execute_set(const Node& node);
  void define_macro(const Node& node);
  Value call_macro(const Node& macro, Arguments& args);
  std::string render_capture(const Body& body);  // a block's output as a string ({% set %}, {% filter %}, macros)
  void bind_targets(const std::vector<std::string>& targets, const Value& item);
  void count_iteration();

  Value eval_attribute(const Expr& e);
  Value eval_subscript(const Expr& e);
  Value eval_slice(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_filter(const Expr& filter, const Value& operand);
  Value eval_filter_chain(const Expr& filter, const Value& input);
  Value eval_test(const Expr& e);
  Value eval_unary(const Expr& e);
  Value eval_binary(const Expr& e);
  Value eval_compare(const Expr& e);
  Arguments eval_arguments(const Expr& e, size_t first);
};

// Arithmetic and membership as Python does them (chat_template_eval.cpp).
Value binary_operation(const std::string& op, const Value& a, const Value& b, const Evaluator& evaluator);
bool contains(const Value& container, const Value& item);

// Filters, tests, attributes, items and globals (chat_template_builtins.cpp).
Value apply_filter(Evaluator& evaluator, const std::string& name, const Value& input, Arguments& args);
bool apply_test(Evaluator& evaluator, const std::string& name, const Value& input, Arguments& args);
Value get_attribute(const Value& object, const std::string& name);  // x.name: attribute first, then item
Value get_item(const Value& object, const Value& key);              // x[key]: item first, then attribute
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step);
void add_globals(std::unordered_map<std::string, Value>& vars);

}  // namespace specula::jinja
