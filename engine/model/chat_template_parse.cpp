// The chat-template parser: tokens to statement and expression trees, with jinja2's
// operator precedence (lowest first):
//   a if c else b;  or;  and;  not;  == != < <= > >= in, not in (chained);  + -;  ~;
//   * / // %;  **;  unary - +;  then primary.postfix (.x [i] [a:b:c] (args)) with its
//   filters (| f(args)) and tests (is [not] t args), which bind tighter than any operator.
#include <set>

#include "model/chat_template_ast.h"

namespace specula::jinja {

namespace {

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, int max_nesting) : tokens_(tokens), max_nesting_(max_nesting) {}

  Body parse_all() {
    std::string end;
    Body body = parse_body({}, end);
    if (peek().kind != TokenKind::End) fail("unexpected tag");
    return body;
  }

 private:
  const std::vector<Token>& tokens_;
  size_t at_ = 0;
  int max_nesting_;
  int nesting_ = 0;

  // Counts nesting for the duration of one recursive parse step.
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.nesting_ > p.max_nesting_) {
        p.raise_limit();
      }
    }
    ~Nest() { --p.nesting_; }
  };

  [[noreturn]] void raise_limit() const {
    raise("TemplateLimitError", "the template nests deeper than " + std::to_string(max_nesting_) + " levels (line " +
                                    std::to_string(peek().line) + ")");
  }

  [[noreturn]] void fail(const std::string& message) const {
    raise("TemplateSyntaxError", message + " (line " + std::to_string(peek().line) + ")");
  }

  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(at_ + ahead, tokens_.size() - 1)]; }
  const Token& next() { return tokens_[std::min(at_++, tokens_.size() - 1)]; }
  bool at_operator(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::Operator && peek(ahead).text == op;
  }
  bool at_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::Name && peek(ahead).text == name;
  }
  bool accept_operator(const char* op) {
    if (!at_operator(op)) return false;
    ++at_;
    return true;
  }
  bool accept_name(const char* name) {
    if (!at_name(name)) return false;
    ++at_;
    return true;
  }
  void expect_operator(const char* op) {
    if (!accept_operator(op)) fail(std::string("expected '") + op + "'");
  }
  void expect(TokenKind kind, const char* what) {
    if (peek().kind != kind) fail(std::string("expected ") + what);
    ++at_;
  }
  std::string expect_name() {
    if (peek().kind != TokenKind::Name) fail("expected a name");
    return next().text;
  }

  // ---- statements ----

  // Statements up to a {% NAME %} with NAME in `ends` (left unread but for its name, in `found`).
  Body parse_body(const std::set<std::string>& ends, std::string& found) {
    Nest nest(*this);
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.kind == TokenKind::End) {
        if (!ends.empty()) fail("unexpected end of template, expected '" + *ends.begin() + "'");
        return body;
      }
      if (t.kind == TokenKind::Text) {
        body.push_back(std::make_unique<Node>(Node{.kind = Node::Kind::Text, .text = next().text, .line = t.line}));
      } else if (t.kind == TokenKind::VariableBegin) {
        ++at_;
        auto node = std::make_unique<Node>(Node{.kind = Node::Kind::Output, .line = t.line});
        node->expr = parse_tuple_or_expression();
        expect(TokenKind::VariableEnd, "'}}'");
        body.push_back(std::move(node));
      } else if (t.kind == TokenKind::BlockBegin) {
        if (peek(1).kind == TokenKind::Name && ends.count(peek(1).text)) {
          at_ += 2;
          found = tokens_[at_ - 1].text;
          return body;
        }
        ++at_;
        if (auto node = parse_statement()) body.push_back(std::move(node));
      } else {
        fail("unexpected token");
      }
    }
  }

  std::unique_ptr<Node> parse_statement() {
    const int line = peek().line;
    const std::string keyword = expect_name();
    if (keyword == "if") return parse_if(line);
    if (keyword == "for") return parse_for(line);
    if (keyword == "set") return parse_set(line);
    if (keyword == "macro") return parse_macro(line);
    if (keyword == "filter") return parse_filter_block(line);
    if (keyword == "break" || keyword == "continue") {
      expect(TokenKind::BlockEnd, "'%}'");
      return std::make_unique<Node>(Node{.kind = keyword == "break" ? Node::Kind::Break : Node::Kind::Continue, .line = line});
    }
    if (keyword == "generation" || keyword == "endgeneration") {  // Hugging Face's assistant-mask markers: no output
      expect(TokenKind::BlockEnd, "'%}'");
      return nullptr;
    }
    fail("Encountered unknown tag '" + keyword + "'");
  }

  std::unique_ptr<Node> parse_if(int line) {
    auto node = std::make_unique<Node>(Node{.kind = Node::Kind::If, .line = line});
    std::string found = "if";
    while (found == "if" || found == "elif") {
      IfBranch branch;
      branch.condition = parse_tuple_or_expression();
      expect(TokenKind::BlockEnd, "'%}'");
      branch.body = parse_body({"elif", "else", "endif"}, found);
      node->branches.push_back(std::move(branch));
    }
    if (found == "else") {
      expect(TokenKind::BlockEnd, "'%}'");
      node->else_body = parse_body({"endif"}, found);
    }
    expect(TokenKind::BlockEnd, "'%}'");
    return node;
  }

  std::unique_ptr<Node> parse_for(int line) {
    auto node = std::make_unique<Node>(Node{.kind = Node::Kind::For, .line = line});
    const bool parenthesized = accept_operator("(");
    do {
      node->targets.push_back(expect_name());
    } while (accept_operator(","));
    if (parenthesized) expect_operator(")");
    if (!accept_name("in")) fail("expected 'in'");
    node->expr = parse_tuple_or_expression(/*allow_condition=*/false);
    if (accept_name("if")) node->condition = parse_expression();
    if (accept_name("recursive")) fail("recursive for loops are not supported");
    expect(TokenKind::BlockEnd, "'%}'");
    std::string found;
    node->body = parse_body({"else", "endfor"}, found);
    if (found == "else") {
      expect(TokenKind::BlockEnd, "'%}'");
      node->else_body = parse_body({"endfor"}, found);
    }
    expect(TokenKind::BlockEnd, "'%}'");
    return node;
  }

  std::unique_ptr<Node> parse_set(int line) {
    auto node = std::make_unique<Node>(Node{.kind = Node::Kind::Set, .line = line});
    node->targets.push_back(expect_name());
    if (accept_operator(".")) {
      node->attribute = expect_name();
    } else {
      while (accept_operator(",")) node->targets.push_back(expect_name());
    }
    if (accept_operator("=")) {
      node->expr = parse_tuple_or_expression();
      expect(TokenKind::BlockEnd, "'%}'");
      return node;
    }
    if (!node->attribute.empty() || node->targets.size() != 1) fail("expected '='");
    node->kind = Node::Kind::SetBlock;
    if (accept_operator("|")) node->filter = parse_filter_chain(nullptr);
    expect(TokenKind::BlockEnd, "'%}'");
    std::string found;
    node->body = parse_body({"endset"}, found);
    expect(TokenKind::BlockEnd, "'%}'");
    return node;
  }

  std::unique_ptr<Node> parse_macro(int line) {
    auto node = std::make_unique<Node>(Node{.kind = Node::Kind::Macro, .line = line});
    node->name = expect_name();
    expect_operator("(");
    while (!accept_operator(")")) {
      if (!node->parameters.empty()) expect_operator(",");
      if (accept_operator(")")) break;
      MacroParameter parameter{.name = expect_name()};
      if (accept_operator("=")) parameter.default_value = parse_expression();
      node->parameters.push_back(std::move(parameter));
    }
    expect(TokenKind::BlockEnd, "'%}'");
    std::string found;
    node->body = parse_body({"endmacro"}, found);
    if (peek().kind == TokenKind::Name) ++at_;  // {% endmacro name %}
    expect(TokenKind::BlockEnd, "'%}'");
    return node;
  }

  std::unique_ptr<Node> parse_filter_block(int line) {
    auto node = std::make_unique<Node>(Node{.kind = Node::Kind::FilterBlock, .line = line});
    node->filter = parse_filter_chain(nullptr);
    expect(TokenKind::BlockEnd, "'%}'");
    std::string found;
    node->body = parse_body({"endfilter"}, found);
    expect(TokenKind::BlockEnd, "'%}'");
    return node;
  }

  // ---- expressions ----

  ExprPtr make(Expr::Kind kind, int line) { return std::make_unique<Expr>(Expr{.kind = kind, .line = line}); }

  // `a, b` without brackets is a tuple in {{ }}, set and for (jinja2's parse_tuple).
  ExprPtr parse_tuple_or_expression(bool allow_condition = true) {
    const int line = peek().line;
    ExprPtr first = allow_condition ? parse_expression() : parse_or();
    if (!at_operator(",")) return first;
    auto tuple = make(Expr::Kind::Tuple, line);
    tuple->children.push_back(std::move(first));
    while (accept_operator(",")) {
      if (peek().kind == TokenKind::BlockEnd || peek().kind == TokenKind::VariableEnd || at_name("if")) break;
      tuple->children.push_back(allow_condition ? parse_expression() : parse_or());
    }
    return tuple;
  }

  ExprPtr parse_expression() {
    Nest nest(*this);
    const int line = peek().line;
    ExprPtr value = parse_or();
    while (accept_name("if")) {
      auto conditional = make(Expr::Kind::Conditional, line);
      conditional->children.push_back(std::move(value));
      conditional->children.push_back(parse_or());
      conditional->children.push_back(accept_name("else") ? parse_expression() : nullptr);
      value = std::move(conditional);
    }
    return value;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      auto node = make(Expr::Kind::Or, next().line);
      node->children.push_back(std::move(left));
      node->children.push_back(parse_and());
      left = std::move(node);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      auto node = make(Expr::Kind::And, next().line);
      node->children.push_back(std::move(left));
      node->children.push_back(parse_not());
      left = std::move(node);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      Nest nest(*this);
      auto node = make(Expr::Kind::Unary, next().line);
      node->name = "not";
      node->children.push_back(parse_not());
      return node;
    }
    return parse_compare();
  }

  // The comparison operator at the cursor ("" when none); consumes it.
  std::string accept_comparison() {
    static const std::set<std::string> ops = {"==", "!=", "<", "<=", ">", ">="};
    if (peek().kind == TokenKind::Operator && ops.count(peek().text)) return next().text;
    if (accept_name("in")) return "in";
    if (at_name("not") && at_name("in", 1)) {
      at_ += 2;
      return "not in";
    }
    return "";
  }

  ExprPtr parse_compare() {
    const int line = peek().line;
    ExprPtr first = parse_math1();
    std::string op = accept_comparison();
    if (op.empty()) return first;
    auto node = make(Expr::Kind::Compare, line);
    node->children.push_back(std::move(first));
    for (; !op.empty(); op = accept_comparison()) {
      node->ops.push_back(op);
      node->children.push_back(parse_math1());
    }
    return node;
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, int line) {
    auto node = make(Expr::Kind::Binary, line);
    node->name = std::move(op);
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    return node;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (at_operator("+") || at_operator("-")) {
      const Token& op = next();
      left = binary(op.text, std::move(left), parse_concat(), op.line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (at_operator("~")) {
      const Token& op = next();
      left = binary("~", std::move(left), parse_math2(), op.line);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (at_operator("*") || at_operator("/") || at_operator("//") || at_operator("%")) {
      const Token& op = next();
      left = binary(op.text, std::move(left), parse_pow(), op.line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (at_operator("**")) {
      const Token& op = next();
      left = binary("**", std::move(left), parse_unary(true), op.line);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nest nest(*this);
    ExprPtr node;
    if (at_operator("-") || at_operator("+")) {
      const Token& op = next();
      node = make(Expr::Kind::Unary, op.line);
      node->name = op.text;
      node->children.push_back(parse_unary(false));
    } else {
      node = parse_postfix(parse_primary());
    }
    return with_filter ? parse_filters_and_tests(std::move(node)) : std::move(node);
  }

  ExprPtr parse_primary() {
    const Token& t = next();
    switch (t.kind) {
      case TokenKind::Name: return parse_name(t);
      case TokenKind::String: {
        std::string text = t.text;
        while (peek().kind == TokenKind::String) text += next().text;  // adjacent literals join
        auto node = make(Expr::Kind::Literal, t.line);
        node->value = Value::string(std::move(text));
        return node;
      }
      case TokenKind::Integer: case TokenKind::Float: {
        auto node = make(Expr::Kind::Literal, t.line);
        node->value = t.kind == TokenKind::Integer ? Value::from_int(t.integer) : Value::from_float(t.real);
        return node;
      }
      case TokenKind::Operator:
        if (t.text == "(") return parse_parenthesized(t.line);
        if (t.text == "[") return parse_list(t.line);
        if (t.text == "{") return parse_dict(t.line);
        break;
      default: break;
    }
    --at_;
    fail("unexpected '" + (t.text.empty() ? std::string("end of tag") : t.text) + "'");
  }

  ExprPtr parse_name(const Token& t) {
    auto node = make(Expr::Kind::Literal, t.line);
    if (t.text == "true" || t.text == "True") node->value = Value::from_bool(true);
    else if (t.text == "false" || t.text == "False") node->value = Value::from_bool(false);
    else if (t.text == "none" || t.text == "None") node->value = Value::none();
    else {
      node->kind = Expr::Kind::Name;
      node->name = t.text;
    }
    return node;
  }

  ExprPtr parse_parenthesized(int line) {
    if (accept_operator(")")) return make(Expr::Kind::Tuple, line);
    ExprPtr first = parse_expression();
    if (accept_operator(")")) return first;
    auto tuple = make(Expr::Kind::Tuple, line);
    tuple->children.push_back(std::move(first));
    while (accept_operator(",")) {
      if (at_operator(")")) break;
      tuple->children.push_back(parse_expression());
    }
    expect_operator(")");
    return tuple;
  }

  ExprPtr parse_list(int line) {
    auto list = make(Expr::Kind::List, line);
    while (!accept_operator("]")) {
      if (!list->children.empty()) expect_operator(",");
      if (accept_operator("]")) break;
      list->children.push_back(parse_expression());
    }
    return list;
  }

  ExprPtr parse_dict(int line) {
    auto dict = make(Expr::Kind::Dict, line);
    while (!accept_operator("}")) {
      if (!dict->children.empty()) expect_operator(",");
      if (accept_operator("}")) break;
      dict->children.push_back(parse_expression());
      expect_operator(":");
      dict->children.push_back(parse_expression());
    }
    return dict;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      const int line = peek().line;
      if (accept_operator(".")) {
        auto attribute = make(Expr::Kind::Attribute, line);
        attribute->children.push_back(std::move(node));
        if (peek().kind == TokenKind::Integer) {  // x.0 is x[0]
          attribute->kind = Expr::Kind::Subscript;
          auto index = make(Expr::Kind::Literal, line);
          index->value = Value::from_int(next().integer);
          attribute->children.push_back(std::move(index));
        } else {
          attribute->name = expect_name();
        }
        node = std::move(attribute);
      } else if (accept_operator("[")) {
        node = parse_subscript(std::move(node), line);
      } else if (at_operator("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr object, int line) {
    Nest nest(*this);
    ExprPtr parts[3];
    int colons = 0;
    if (!at_operator(":")) parts[0] = parse_expression();
    while (colons < 2 && accept_operator(":")) {
      ++colons;
      if (!at_operator(":") && !at_operator("]")) parts[colons] = parse_expression();
    }
    expect_operator("]");
    auto node = make(colons ? Expr::Kind::Slice : Expr::Kind::Subscript, line);
    node->children.push_back(std::move(object));
    if (!colons && !parts[0]) fail("expected an index");
    for (int i = 0; i < (colons ? 3 : 1); ++i) node->children.push_back(std::move(parts[i]));
    return node;
  }

  // (args): positional arguments, then name=value ones.
  void parse_arguments(Expr& call) {
    expect_operator("(");
    while (!accept_operator(")")) {
      if (call.arg_names.size() > 0) expect_operator(",");
      if (accept_operator(")")) break;
      std::string name;
      if (peek().kind == TokenKind::Name && at_operator("=", 1)) {
        name = next().text;
        ++at_;
      }
      call.arg_names.push_back(name);
      call.children.push_back(parse_expression());
    }
  }

  ExprPtr parse_call(ExprPtr callee) {
    Nest nest(*this);
    auto call = make(Expr::Kind::Call, peek().line);
    call->children.push_back(std::move(callee));
    parse_arguments(*call);
    return call;
  }

  // `| name(args)` repeated; `operand` null for filter blocks and `set x | f`.
  ExprPtr parse_filter_chain(ExprPtr operand) {
    ExprPtr node = std::move(operand);
    do {
      auto filter = make(Expr::Kind::Filter, peek().line);
      filter->name = expect_name();
      while (accept_operator(".")) filter->name += std::string(".") + expect_name();
      filter->children.push_back(std::move(node));
      if (at_operator("(")) parse_arguments(*filter);
      node = std::move(filter);
    } while (accept_operator("|"));
    return node;
  }

  ExprPtr parse_filters_and_tests(ExprPtr node) {
    while (true) {
      if (accept_operator("|")) {
        Nest nest(*this);
        auto filter = make(Expr::Kind::Filter, peek().line);
        filter->name = expect_name();
        filter->children.push_back(std::move(node));
        if (at_operator("(")) parse_arguments(*filter);
        node = std::move(filter);
      } else if (at_name("is")) {
        node = parse_test(std::move(node));
      } else if (at_operator("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_test(ExprPtr operand) {
    Nest nest(*this);
    auto test = make(Expr::Kind::Test, next().line);
    test->negated = accept_name("not");
    test->name = expect_name();
    test->children.push_back(std::move(operand));
    if (at_operator("(")) {
      parse_arguments(*test);
    } else if (takes_bare_argument()) {  // `is equalto 'x'`, `is divisibleby 3`
      test->arg_names.push_back("");
      test->children.push_back(parse_postfix(parse_primary()));
    }
    return test;
  }

  bool takes_bare_argument() const {
    const Token& t = peek();
    if (t.kind == TokenKind::String || t.kind == TokenKind::Integer || t.kind == TokenKind::Float) return true;
    if (t.kind == TokenKind::Operator) return t.text == "[" || t.text == "{";
    if (t.kind != TokenKind::Name) return false;
    static const std::set<std::string> stops = {"else", "or", "and", "if", "in", "not", "is"};
    return !stops.count(t.text);
  }
};

}  // namespace

Body parse_template(const std::vector<Token>& tokens, int max_nesting) { return Parser(tokens, max_nesting).parse_all(); }

}  // namespace specula::jinja
