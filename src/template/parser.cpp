#include "template/parser.h"

#include <charconv>
#include <cstdlib>
#include <set>

#include "template/builtins.h"

namespace deltafin::jinja {

namespace {

struct ParseError {
  std::string message;
  int line;
};

class Parser {
 public:
  Parser(const std::vector<Token>& t, int max_nesting) : t_(t), max_nesting_(max_nesting) {}

  Body parse_all() {
    Body body = parse_body({});
    if (peek().type != Tok::End) error("unexpected tag");
    return body;
  }

 private:
  const std::vector<Token>& t_;
  size_t p_ = 0;
  int depth_ = 0;
  int max_nesting_;

  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.depth_ > p.max_nesting_) p.error("the template nests too deeply");
    }
    ~Nest() { --p.depth_; }
  };

  const Token& peek(size_t k = 0) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  const Token& next() {
    const Token& tok = t_[p_];
    if (p_ + 1 < t_.size()) ++p_;
    return tok;
  }
  [[noreturn]] void error(const std::string& m) const { throw ParseError{m, peek().line}; }
  bool is_op(const char* op, size_t k = 0) const { return peek(k).type == Tok::Op && peek(k).text == op; }
  bool is_name(const char* n, size_t k = 0) const { return peek(k).type == Tok::Name && peek(k).text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) error(std::string("expected '") + op + "', got " + describe(peek()));
  }
  std::string expect_name() {
    if (peek().type != Tok::Name) error("expected a name, got " + describe(peek()));
    return next().text;
  }
  void expect_block_end() {
    if (peek().type != Tok::BlockEnd) error("expected the end of the statement, got " + describe(peek()));
    next();
  }
  static std::string describe(const Token& tok) {
    switch (tok.type) {
      case Tok::End: return "the end of the template";
      case Tok::BlockEnd: return "'%}'";
      case Tok::VarEnd: return "'}}'";
      case Tok::Text: return "text";
      case Tok::String: return "a string";
      default: return "'" + tok.text + "'";
    }
  }

  // Statements until a `{% <one of ends> %}` (left unconsumed) or the end.
  Body parse_body(const std::set<std::string>& ends) {
    Nest nest(*this);
    Body body;
    while (true) {
      const Token& tok = peek();
      if (tok.type == Tok::End) {
        if (!ends.empty()) error("missing {% " + *ends.rbegin() + " %}");
        return body;
      }
      if (tok.type == Tok::Text) {
        auto n = std::make_unique<Node>();
        n->kind = NodeKind::Text;
        n->line = tok.line;
        n->text = tok.text;
        body.push_back(std::move(n));
        next();
        continue;
      }
      if (tok.type == Tok::VarBegin) {
        next();
        auto n = std::make_unique<Node>();
        n->kind = NodeKind::Output;
        n->line = tok.line;
        n->expr = parse_tuple_expr();
        if (peek().type != Tok::VarEnd) error("expected '}}', got " + describe(peek()));
        next();
        body.push_back(std::move(n));
        continue;
      }
      if (tok.type != Tok::BlockBegin) error("unexpected " + describe(tok));
      const Token& kw = peek(1);
      if (kw.type != Tok::Name) {
        next();
        error("expected a statement name, got " + describe(peek()));
      }
      if (ends.count(kw.text)) return body;
      next();
      body.push_back(parse_statement());
    }
  }

  NodeP parse_statement() {
    const Token& kw = next();
    const std::string& k = kw.text;
    auto n = std::make_unique<Node>();
    n->line = kw.line;
    if (k == "if") {
      n->kind = NodeKind::If;
      ExprP cond = parse_expr();
      expect_block_end();
      while (true) {
        Body b = parse_body({"elif", "else", "endif"});
        n->branches.emplace_back(std::move(cond), std::move(b));
        next();  // BlockBegin
        const std::string which = next().text;
        if (which == "elif") {
          cond = parse_expr();
          expect_block_end();
          continue;
        }
        if (which == "else") {
          expect_block_end();
          n->branches.emplace_back(nullptr, parse_body({"endif"}));
          next();
          next();
        }
        expect_block_end();
        return n;
      }
    }
    if (k == "for") {
      n->kind = NodeKind::For;
      do {
        n->targets.push_back(expect_name());
      } while (skip_op(","));
      if (!skip_name("in")) error("expected 'in' in the for statement");
      n->expr = parse_tuple_expr(/*with_condexpr=*/false);
      if (skip_name("if")) n->filter = parse_expr();
      if (is_name("recursive")) error("unsupported construct: recursive for loops");
      expect_block_end();
      n->body = parse_body({"else", "endfor"});
      next();
      if (next().text == "else") {
        expect_block_end();
        n->else_body = parse_body({"endfor"});
        next();
        next();
      }
      expect_block_end();
      return n;
    }
    if (k == "set") {
      n->targets.push_back(expect_name());
      if (skip_op(".")) {
        n->targets.push_back(expect_name());
        n->attr_target = true;
      } else {
        while (skip_op(",")) n->targets.push_back(expect_name());
      }
      if (skip_op("=")) {
        n->kind = NodeKind::Set;
        n->expr = parse_tuple_expr();
        expect_block_end();
        return n;
      }
      if (n->targets.size() != 1 || n->attr_target) error("expected '=' in the set statement");
      if (is_op("|")) error("unsupported construct: filters on a block set");
      n->kind = NodeKind::SetBlock;
      expect_block_end();
      n->body = parse_body({"endset"});
      next();
      next();
      expect_block_end();
      return n;
    }
    if (k == "macro") {
      n->kind = NodeKind::Macro;
      n->name = expect_name();
      expect_op("(");
      while (!skip_op(")")) {
        if (!n->params.empty()) expect_op(",");
        if (skip_op(")")) break;
        std::string param = expect_name();
        ExprP def;
        if (skip_op("=")) def = parse_expr();
        n->params.emplace_back(std::move(param), std::move(def));
      }
      expect_block_end();
      n->body = parse_body({"endmacro"});
      next();
      next();
      if (peek().type == Tok::Name) next();  // {% endmacro name %}
      expect_block_end();
      return n;
    }
    if (k == "break" || k == "continue") {
      n->kind = k == "break" ? NodeKind::Break : NodeKind::Continue;
      expect_block_end();
      return n;
    }
    if (k == "generation") {  // transformers' AssistantTracker: renders its body
      n->kind = NodeKind::Block;
      expect_block_end();
      n->body = parse_body({"endgeneration"});
      next();
      next();
      expect_block_end();
      return n;
    }
    static const std::set<std::string> kKnown = {
        "call", "filter", "include", "import", "from", "extends", "block", "with", "autoescape",
        "do", "trans", "pluralize", "raw", "endcall", "endfilter", "endblock", "endwith"};
    if (kKnown.count(k)) error("unsupported construct: the '" + k + "' statement");
    error("unknown statement '" + k + "'");
  }

  ExprP make(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // `a, b` without parentheses is a tuple where Jinja allows it ({{ }}, set, for).
  ExprP parse_tuple_expr(bool with_condexpr = true) {
    const int line = peek().line;
    ExprP first = with_condexpr ? parse_expr() : parse_or();
    if (!is_op(",")) return first;
    auto t = make(ExprKind::Tuple, line);
    t->items.push_back(std::move(first));
    while (skip_op(",")) {
      if (peek().type == Tok::BlockEnd || peek().type == Tok::VarEnd) break;
      t->items.push_back(with_condexpr ? parse_expr() : parse_or());
    }
    return t;
  }

  ExprP parse_expr() {
    Nest nest(*this);
    ExprP e = parse_or();
    while (is_name("if")) {
      const int line = next().line;
      auto c = make(ExprKind::Cond, line);
      c->a = parse_or();
      c->b = std::move(e);
      if (skip_name("else")) c->c = parse_expr();
      e = std::move(c);
    }
    return e;
  }
  ExprP parse_or() {
    ExprP e = parse_and();
    while (is_name("or")) {
      auto o = make(ExprKind::Or, next().line);
      o->a = std::move(e);
      o->b = parse_and();
      e = std::move(o);
    }
    return e;
  }
  ExprP parse_and() {
    ExprP e = parse_not();
    while (is_name("and")) {
      auto o = make(ExprKind::And, next().line);
      o->a = std::move(e);
      o->b = parse_not();
      e = std::move(o);
    }
    return e;
  }
  ExprP parse_not() {
    if (is_name("not")) {
      Nest nest(*this);
      auto n = make(ExprKind::Not, next().line);
      n->a = parse_not();
      return n;
    }
    return parse_compare();
  }
  ExprP parse_compare() {
    const int line = peek().line;
    ExprP e = parse_math1();
    ExprP cmp;
    while (true) {
      std::string op;
      if (peek().type == Tok::Op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                     peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(ExprKind::Compare, line);
        cmp->items.push_back(std::move(e));
      }
      cmp->ops.push_back(op);
      cmp->items.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(e);
  }
  ExprP binary(const std::string& op, ExprP a, ExprP b, int line) {
    auto e = make(ExprKind::Binary, line);
    e->name = op;
    e->a = std::move(a);
    e->b = std::move(b);
    return e;
  }
  ExprP parse_math1() {
    ExprP e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& op = next();
      e = binary(op.text, std::move(e), parse_concat(), op.line);
    }
    return e;
  }
  ExprP parse_concat() {
    const int line = peek().line;
    ExprP e = parse_math2();
    if (!is_op("~")) return e;
    auto c = make(ExprKind::Concat, line);
    c->items.push_back(std::move(e));
    while (skip_op("~")) c->items.push_back(parse_math2());
    return c;
  }
  ExprP parse_math2() {
    ExprP e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& op = next();
      e = binary(op.text, std::move(e), parse_pow(), op.line);
    }
    return e;
  }
  ExprP parse_pow() {
    ExprP e = parse_unary(true);
    while (is_op("**")) {
      const Token& op = next();
      e = binary("**", std::move(e), parse_unary(true), op.line);
    }
    return e;
  }
  ExprP parse_unary(bool with_filter) {
    Nest nest(*this);
    ExprP e;
    if (is_op("-") || is_op("+")) {
      const Token& op = next();
      e = make(op.text == "-" ? ExprKind::Neg : ExprKind::Pos, op.line);
      e->a = parse_unary(false);
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }
  ExprP parse_primary() {
    const Token& tok = peek();
    switch (tok.type) {
      case Tok::Name: {
        next();
        if (tok.text == "true" || tok.text == "True") return literal(Value::boolean(true), tok.line);
        if (tok.text == "false" || tok.text == "False") return literal(Value::boolean(false), tok.line);
        if (tok.text == "none" || tok.text == "None") return literal(Value::none(), tok.line);
        auto e = make(ExprKind::Name, tok.line);
        e->name = tok.text;
        return e;
      }
      case Tok::String: {
        std::string s;
        const int line = tok.line;
        while (peek().type == Tok::String) s += next().text;  // adjacent literals concatenate
        return literal(Value::string(std::move(s)), line);
      }
      case Tok::Int: {
        next();
        int64_t v = 0;
        const auto r = std::from_chars(tok.text.data(), tok.text.data() + tok.text.size(), v);
        if (r.ec != std::errc()) error("integer literal out of range");
        return literal(Value::integer(v), tok.line);
      }
      case Tok::Float: {
        next();
        return literal(Value::number(std::strtod(tok.text.c_str(), nullptr)), tok.line);
      }
      case Tok::Op: {
        if (tok.text == "(") {
          next();
          if (skip_op(")")) return make(ExprKind::Tuple, tok.line);
          ExprP first = parse_expr();
          if (skip_op(")")) return first;
          auto t = make(ExprKind::Tuple, tok.line);
          t->items.push_back(std::move(first));
          while (skip_op(",")) {
            if (is_op(")")) break;
            t->items.push_back(parse_expr());
          }
          expect_op(")");
          return t;
        }
        if (tok.text == "[") {
          next();
          auto l = make(ExprKind::List, tok.line);
          while (!skip_op("]")) {
            if (!l->items.empty()) expect_op(",");
            if (skip_op("]")) break;
            l->items.push_back(parse_expr());
          }
          return l;
        }
        if (tok.text == "{") {
          next();
          auto d = make(ExprKind::Dict, tok.line);
          while (!skip_op("}")) {
            if (!d->items.empty()) expect_op(",");
            if (skip_op("}")) break;
            d->items.push_back(parse_expr());
            expect_op(":");
            d->items.push_back(parse_expr());
          }
          return d;
        }
        break;
      }
      default: break;
    }
    error("unexpected " + describe(tok));
  }
  ExprP literal(Value v, int line) {
    auto e = make(ExprKind::Literal, line);
    e->value = std::move(v);
    return e;
  }
  ExprP parse_postfix(ExprP e) {
    while (true) {
      if (is_op(".")) {
        const int line = next().line;
        auto a = make(ExprKind::Attr, line);
        if (peek().type == Tok::Int) {
          a->kind = ExprKind::Item;
          a->b = literal(Value::integer(std::atoll(next().text.c_str())), line);
        } else {
          a->name = expect_name();
        }
        a->a = std::move(e);
        e = std::move(a);
      } else if (is_op("[")) {
        const int line = next().line;
        e = parse_subscript(std::move(e), line);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }
  ExprP parse_subscript(ExprP obj, int line) {
    ExprP parts[3];
    bool slice = false;
    int part = 0;
    while (!is_op("]")) {
      if (skip_op(":")) {
        slice = true;
        if (++part > 2) error("too many ':' in a slice");
        continue;
      }
      if (is_op(",")) error("unsupported construct: a tuple subscript");
      if (parts[part]) error("expected ']' or ':'");
      parts[part] = parse_expr();
    }
    next();
    if (!slice) {
      if (!parts[0]) error("expected an index");
      auto e = make(ExprKind::Item, line);
      e->a = std::move(obj);
      e->b = std::move(parts[0]);
      return e;
    }
    auto e = make(ExprKind::Slice, line);
    e->a = std::move(obj);
    for (auto& x : parts) e->items.push_back(std::move(x));
    return e;
  }
  void parse_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!skip_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (skip_op(")")) break;
      if (is_op("*") || is_op("**")) error("unsupported construct: *args and **kwargs in a call");
      if (peek().type == Tok::Name && is_op("=", 1)) {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(std::move(key), parse_expr());
      } else {
        if (!e.kwargs.empty()) error("a positional argument after keyword arguments");
        e.items.push_back(parse_expr());
      }
    }
  }
  ExprP parse_call(ExprP callee) {
    auto e = make(ExprKind::Call, peek().line);
    e->a = std::move(callee);
    parse_args(*e);
    return e;
  }
  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".") && peek(1).type == Tok::Name) {
      next();
      n += "." + next().text;
    }
    return n;
  }
  ExprP parse_filter_expr(ExprP e) {
    while (true) {
      if (is_op("|")) {
        const int line = next().line;
        auto f = make(ExprKind::Filter, line);
        f->name = dotted_name();
        if (!has_filter(f->name)) error("unsupported filter '" + f->name + "'");
        if (is_op("(")) parse_args(*f);
        f->a = std::move(e);
        e = std::move(f);
      } else if (is_name("is")) {
        const int line = next().line;
        auto t = make(ExprKind::Test, line);
        t->negated = skip_name("not");
        t->name = dotted_name();
        if (!has_test(t->name)) error("unsupported test '" + t->name + "'");
        if (is_op("(")) {
          parse_args(*t);
        } else if ((peek().type == Tok::Name || peek().type == Tok::String || peek().type == Tok::Int ||
                    peek().type == Tok::Float || is_op("(") || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) error("you cannot chain multiple tests with is");
          t->items.push_back(parse_postfix(parse_primary()));
        }
        t->a = std::move(e);
        e = std::move(t);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }
};

}  // namespace

Result<Body> parse(const std::vector<Token>& tokens, int max_nesting) {
  try {
    Parser p(tokens, max_nesting);
    return p.parse_all();
  } catch (const ParseError& e) {
    return error("template line {}: {}", e.line, e.message);
  }
}

}  // namespace deltafin::jinja
