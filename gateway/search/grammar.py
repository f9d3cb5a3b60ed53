"""The grammar of feature expressions, for lark (LALR). Kept in Python so that it ships with the
package without package-data globs."""

GRAMMAR = r"""
// Feature expressions: conditions and weighted sums over SAE feature activations.
// Precedence, loosest first: OR, AND, NOT, comparison, + -, *, unary minus.
// A numeric expression used as a condition means "> 0" (so a bare F12 means "F12 fires").
// SEGMENT(c) (alias SENTENCE): c holds in one segment of the document. A condition, never a number,
// so it sits with NOT: "F1 >" does not offer it, and "SEGMENT(F1) > 0" fails at the ">".

?start: or_expr

?or_expr: and_expr
        | or_expr _OR and_expr          -> or_
?and_expr: not_expr
         | and_expr _AND not_expr       -> and_
?not_expr: comparison
         | _NOT not_expr                -> not_
         | _SEGMENT _LPAR or_expr _RPAR -> segment
?comparison: sum
           | sum COMP sum               -> compare
?sum: product
    | sum PLUS product                  -> add
    | sum MINUS product                 -> add
?product: unary
        | product _STAR unary           -> mul
?unary: atom
      | MINUS unary                     -> neg
?atom: NUMBER                           -> number
     | FEATURE                          -> feature
     | _LABEL STRING                    -> label
     | _FAMILY INT                      -> family
     | _ANY _LPAR sum (_COMMA sum)* _RPAR -> any_
     | _LPAR or_expr _RPAR

// Keywords are case-insensitive and whole words (ANDROID is not AND ROID).
_OR.2: /or\b/i
_AND.2: /and\b/i
_NOT.2: /not\b/i
_ANY.2: /any(?=\s*\()/i
_LABEL.2: /label\s*:/i
_FAMILY.2: /family\s*:/i
_SEGMENT.2: /(segment|sentence)\b/i
FEATURE: /f[0-9]+\b/i
COMP: ">=" | "<=" | ">" | "<" | "="
PLUS: "+"
MINUS: "-"
_STAR: "*"
_LPAR: "("
_RPAR: ")"
_COMMA: ","
NUMBER: /([0-9]+(\.[0-9]*)?|\.[0-9]+)(e[+-]?[0-9]+)?/i
INT: /[0-9]+/
STRING: /"([^"\\\n]|\\.)*"/

%import common.WS
%ignore WS
"""
