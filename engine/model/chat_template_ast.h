// The parsed form of a chat template: the lexer's tokens, expression and statement trees.
// Internal to the renderer: chat_template_lex.cpp makes tokens, chat_template_parse.cpp
// trees, chat_template_eval.cpp runs them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/chat_template.h"
#include "model/chat_template_value.h"

namespace specula::jinja {

enum class TokenKind {
  Text,           // template text, whitespace control already applied
  VariableBegin,  // {{
  VariableEnd,    // }}
  BlockBegin,     // {%
  BlockEnd,       // %}
  Name,
  String,
  Integer,
  Float,
  Operator,       // + - * / // % ** ~ | . , : ( ) [ ] { } = == != < <= > >=
  End,
};

struct Token {
  TokenKind kind = TokenKind::End;
  std::string text;  // Text, Name, String (unescaped), Operator
  int64_t integer = 0;
  double real = 0;
  int line = 1;
};

// Splits a template into tokens as jinja2 does with trim_blocks and lstrip_blocks on;
// {% raw %} blocks come out as Text. Throws TemplateSyntaxError.
std::vector<Token> lex_template(const std::string& source);

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,      // `value`
    Name,         // `name`
    List,         // [children...]
    Tuple,        // (children...)
    Dict,         // {children[0]: children[1], ...}
    Attribute,    // children[0].name
    Subscript,    // children[0][children[1]]
    Slice,        // children[0][children[1]:children[2]:children[3]] (null where absent)
    Call,         // children[0](children[1..]), arg_names per argument ("" positional)
    Filter,       // children[0] | name(children[1..]); children[0] null in a filter block
    Test,         // children[0] is [not] name(children[1..])
    Unary,        // name ("-", "+", "not") children[0]
    Binary,       // children[0] name children[1]: + - * / // % ** ~ in, not in
    Compare,      // children[0] ops[0] children[1] ops[1] children[2] ... (chained)
    And,
    Or,
    Conditional,  // children[0] if children[1] else children[2] (null: undefined)
  };
  Kind kind = Kind::Literal;
  Value value;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<std::string> arg_names;  // Call, Filter, Test: the name of each argument after the first child
  std::vector<std::string> ops;        // Compare
  bool negated = false;                // Test: `is not`
  int line = 0;
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct IfBranch {
  ExprPtr condition;
  Body body;
};

struct MacroParameter {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Node {
  enum class Kind {
    Text,         // text
    Output,       // {{ expr }}
    If,           // branches, else_body
    For,          // for targets in expr [if condition]: body [else: else_body]
    Set,          // set targets[0] (or targets[0].attribute) = expr
    SetBlock,     // set targets[0] [| filter]: body
    Macro,        // macro name(parameters): body
    FilterBlock,  // filter filter: body
    Break,
    Continue,
  };
  Kind kind = Kind::Text;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  ExprPtr filter;  // a Filter expression without its operand
  std::vector<std::string> targets;
  std::string attribute;
  std::string name;
  std::vector<MacroParameter> parameters;
  std::vector<IfBranch> branches;
  Body body;
  Body else_body;
  int line = 0;
};

// Parses the tokens into statements; throws TemplateSyntaxError.
Body parse_template(const std::vector<Token>& tokens, int max_nesting);

}  // namespace specula::jinja

namespace specula {

struct ChatTemplate::Program {
  jinja::Body body;
};

}  // namespace specula
