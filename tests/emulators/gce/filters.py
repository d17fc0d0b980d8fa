"""filters.py - the `filter` parameter of compute list calls.

Two styles, never mixed in one expression (as on Compute Engine):
  - AIP-160 comparisons:  labels.pbx-cluster = "c1"   status != RUNNING
    name : gpu-*   (a = 1) (b = 2)   a = 1 AND b = 2   a = 1 OR a = 2   NOT a = 1
  - regular expressions:  labels.pbx-cluster eq c1   name ne "gpu-.*"
Terms side by side are ANDed; OR binds tighter than AND (AIP-160).  A field
path walks the resource; a list on the way matches when any element does.
parse() raises ValueError for an expression Compute Engine would refuse.
"""

import fnmatch
import re

_TOKEN = re.compile(r'\s*(?:(\()|(\))|(!=|>=|<=|=|>|<|:)|"((?:[^"\\]|\\.)*)"|([^\s()=!<>:"]+))')


def _tokens(text):
    pos, out = 0, []
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError("unexpected character at %d" % pos)
        pos = m.end()
        lp, rp, op, quoted, word = m.groups()
        if lp:
            out.append(("(", "("))
        elif rp:
            out.append((")", ")"))
        elif op:
            out.append(("op", op))
        elif quoted is not None:
            out.append(("str", re.sub(r"\\(.)", r"\1", quoted)))
        else:
            out.append(("word", word))
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


class _Parser:
    def __init__(self, text):
        self.toks = _tokens(text)
        self.i = 0
        self.styles = set()

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self):
        t = self.peek()
        self.i += 1
        return t

    def parse(self):
        if not self.toks:
            return lambda r: True
        e = self.conjunction()
        if self.i != len(self.toks):
            raise ValueError("unexpected %r" % (self.peek()[1],))
        if len(self.styles) > 1:
            raise ValueError("comparison and regular-expression styles mixed")
        return e

    def conjunction(self):
        parts = [self.disjunction()]
        while True:
            kind, val = self.peek()
            if kind is None or kind == ")":
                break
            if kind == "word" and val == "AND":
                self.take()
            parts.append(self.disjunction())
        return lambda r: all(p(r) for p in parts)

    def disjunction(self):
        parts = [self.unary()]
        while self.peek() == ("word", "OR"):
            self.take()
            parts.append(self.unary())
        return lambda r: any(p(r) for p in parts)

    def unary(self):
        kind, val = self.peek()
        if kind == "word" and val == "NOT":
            self.take()
            inner = self.unary()
            return lambda r: not inner(r)
        if kind == "(":
            self.take()
            inner = self.conjunction()
            if self.take()[0] != ")":
                raise ValueError("missing )")
            return inner
        return self.term()

    def term(self):
        kind, field = self.take()
        if kind != "word" or field in ("AND", "OR", "NOT"):
            raise ValueError("expected a field name")
        kind, op = self.take()
        if kind == "word" and op in ("eq", "ne"):
            self.styles.add("regex")
        elif kind == "op":
            self.styles.add("aip")
        else:
            raise ValueError("expected an operator after %s" % field)
        vkind, value = self.take()
        if vkind not in ("word", "str"):
            raise ValueError("expected a value after %s %s" % (field, op))
        return _compare(field, op, value)


def _values(resource, path):
    cur = [resource]
    for part in path.split("."):
        nxt = []
        for c in cur:
            if isinstance(c, dict) and part in c:
                v = c[part]
                nxt.extend(v if isinstance(v, list) else [v])
        cur = nxt
    return [_text(v) for v in cur if not isinstance(v, (dict, list))]


def _text(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _last(v):
    """Resource links compare by their last segment (zone = us-central1-a)."""
    return v.rsplit("/", 1)[-1] if v.startswith("http") else v


def _compare(field, op, value):
    if op in ("eq", "ne"):
        try:
            rx = re.compile(value)
        except re.error as e:
            raise ValueError("bad regular expression %r: %s" % (value, e))
        hit = lambda r: any(rx.fullmatch(v) or rx.fullmatch(_last(v)) for v in _values(r, field))
        return hit if op == "eq" else (lambda r: not hit(r))
    if op == ":":
        return lambda r: any(fnmatch.fnmatchcase(v, value) or fnmatch.fnmatchcase(_last(v), value)
                             for v in _values(r, field)) or (value == "*" and _values(r, field) != [])
    if op == "=":
        return lambda r: any(v == value or _last(v) == value for v in _values(r, field))
    if op == "!=":
        return lambda r: not any(v == value or _last(v) == value for v in _values(r, field))
    def ordered(r):
        for v in _values(r, field):
            a, b = v, value
            try:
                a, b = float(v), float(value)
            except ValueError:
                pass
            if {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]:
                return True
        return False
    return ordered


def parse(text):
    """A predicate over resources (dicts) for filter TEXT; ValueError if bad."""
    return _Parser(text).parse()
