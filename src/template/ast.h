// The parsed template: expressions and statements, each with its line.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace deltafin::jinja {

struct Expr;
using ExprP = std::unique_ptr<Expr>;

enum class ExprKind {
  Literal,  // value
  Name,     // name
  List,     // items
  Tuple,    // items
  Dict,     // items: key, value, key, value...
  Attr,     // a.name
  Item,     // a[b]
  Slice,    // a[items[0]:items[1]:items[2]] (null parts omitted)
  Call,     // a(items, kwargs)
  Filter,   // a|name(items, kwargs)
  Test,     // a is [not] name(items)
  Neg,
  Pos,
  Not,
  Binary,   // a op b: + - * / // % **
  Concat,   // items joined with ~
  Compare,  // items[0] ops[0] items[1] ...
  And,
  Or,
  Cond,     // b if a else c
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;
  std::string name;  // Name, Attr, Filter, Test, Binary operator
  bool negated = false;
  ExprP a, b, c;
  std::vector<ExprP> items;
  std::vector<std::pair<std::string, ExprP>> kwargs;
  std::vector<std::string> ops;
};

struct Node;
using NodeP = std::unique_ptr<Node>;
using Body = std::vector<NodeP>;

enum class NodeKind { Text, Output, If, For, Set, SetBlock, Macro, Break, Continue, Block };

struct Node {
  NodeKind kind;
  int line = 0;
  std::string text;                                // Text
  ExprP expr;                                      // Output, Set value, For iterable
  std::vector<std::pair<ExprP, Body>> branches;    // If: condition (null for else) and body
  std::vector<std::string> targets;                // For/Set names; Set ns.attr: {ns, attr}, attr set
  bool attr_target = false;
  ExprP filter;                                    // For: `if` condition
  Body body, else_body;                            // For, SetBlock, Macro, Block (generation)
  std::string name;                                // Macro
  std::vector<std::pair<std::string, ExprP>> params;  // Macro: name and default (may be null)
};

}  // namespace deltafin::jinja
