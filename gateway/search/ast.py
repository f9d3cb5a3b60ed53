"""The syntax tree of a feature expression: small frozen nodes, each with its source position.

Positions are 1-based (line, column), as lark reports them, so an error found while resolving or
evaluating a node (an unknown label, an index out of range) can point at the same place a parse
error would.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Node:
    line: int
    column: int


@dataclass(frozen=True)
class Num(Node):
    value: float


@dataclass(frozen=True)
class FeatureRef(Node):
    index: int


@dataclass(frozen=True)
class LabelRef(Node):
    label: str


@dataclass(frozen=True)
class FamilyRef(Node):
    family_id: int


@dataclass(frozen=True)
class AnyOf(Node):
    """any(a, b, ...): the largest of its arguments, document by document."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Arith(Node):
    op: str  # "+", "-", "*"
    left: Node
    right: Node


@dataclass(frozen=True)
class Neg(Node):
    item: Node


@dataclass(frozen=True)
class Compare(Node):
    op: str  # ">", ">=", "<", "<=", "="
    left: Node
    right: Node


@dataclass(frozen=True)
class And(Node):
    left: Node
    right: Node


@dataclass(frozen=True)
class Or(Node):
    left: Node
    right: Node


@dataclass(frozen=True)
class Not(Node):
    item: Node


@dataclass(frozen=True)
class Segment(Node):
    """SEGMENT(condition): the condition holds in at least one segment (clause or sentence) of the document,
    every reference inside read on that segment's codes."""

    item: Node


NUMERIC = (Num, FeatureRef, LabelRef, FamilyRef, AnyOf, Arith, Neg)
CONDITION = (Compare, And, Or, Not, Segment)


def children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, (Arith, Compare, And, Or)):
        return (node.left, node.right)
    if isinstance(node, (Neg, Not, Segment)):
        return (node.item,)
    if isinstance(node, AnyOf):
        return node.items
    return ()


def walk(node: Node):  # noqa: ANN201 - a generator of nodes, pre-order
    yield node
    for child in children(node):
        yield from walk(child)


def has_reference(node: Node) -> bool:
    """True when the node's value depends on some feature (not a constant)."""
    return any(isinstance(n, (FeatureRef, LabelRef, FamilyRef)) for n in walk(node))


@dataclass(frozen=True)
class Expression:
    """A parsed expression: its source text and its tree."""

    text: str
    root: Node

    def feature_indices(self) -> list[int]:
        """The `F<n>` references, in order of first appearance (labels and families not resolved)."""
        seen: dict[int, None] = {}
        for n in walk(self.root):
            if isinstance(n, FeatureRef):
                seen.setdefault(n.index, None)
        return list(seen)
