"""Single-point mutants of the RTL, found by a careful reading of its tokens (scripts/mutate).

Each mutant changes one place in one file of rtl/files.f (the generated tsr_pkg.sv and
tsr_gemm_cfg.sv are left alone: they are the spec's, checked against it by their own test):

  relational   < <= > >= swapped for the boundary (< for <=) and the opposite (< for >=)
  equality     == for != and != for ==
  logical      && for || and || for &&
  constant     a literal one up or one down ('0 for '1 and back); a named constant in a comparison
               (a bound) one up or one down
  drop         a term dropped from a sum, a difference, an && or an ||
  invert       an if's condition inverted
  stuck        an if's condition stuck at 1 or 0; an enable, valid, ready, push, pop, start or
               clear assigned a constant '0 or '1

Nothing is mutated in declarations (widths, ports, parameters), in casts, part-select widths or
replication counts (a width changed is a lint error, not a bug the regression has to find), in
simulation-only code (`ifndef SYNTHESIS), nor the asynchronous reset's condition (the simulations
start from zeros, Verilator being two-state, so an engine that never resets behaves alike there;
the values a reset gives are mutated). A nonblocking assignment's <= is told from a comparison
by where it stands: the first assignment operator at the top level of its statement.
"""
import dataclasses
import hashlib
import re

TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<directive>`\w+)
  | (?P<string>"(?:\\.|[^"\\])*")
  | (?P<number>\d[\d_]*\s*'s?[bodhBODH][0-9a-fA-FxXzZ_?]+|'[01xXzZ]\b|\d[\d_]*(?:\.\d+)?)
  | (?P<ident>\$?[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<op><<<=|>>>=|<<<|>>>|===|!==|<<=|>>=|<=|>=|==|!=|&&|\|\||<<|>>|\+:|-:|::|->|\+\+|--|\+=|-=|\|=|&=|\*\*|.)
""", re.VERBOSE | re.DOTALL)

DECLARATION = {"logic", "wire", "reg", "input", "output", "inout", "parameter", "localparam", "int", "integer",
               "bit", "byte", "genvar", "typedef", "import", "module", "package", "function", "task", "automatic",
               "signed", "unsigned"}
# Tokens after which a new statement begins (a block's label, `begin : g_lane`, goes with them).
STATEMENT_START = {";", "begin", "end", "else", "always_ff", "always_comb", "always_latch", "assign", "initial",
                   "generate", "endgenerate", "case", "endcase", "default", "endfunction", "endtask", "endmodule",
                   "endpackage"}
# Keywords whose parenthesized header precedes a statement.
HEADER = {"if", "for", "while", "case", "casez", "casex", "@"}
OPERATORS = {"relational", "equality", "logical", "constant", "drop", "invert", "stuck"}
ENABLE = re.compile(r"(^|_)(en|enable|valid|ready|push|pop|start|clear|we)(_[a-z]+)?$")
RELATIONAL = {"<": ("<=", ">="), "<=": ("<", ">"), ">": (">=", "<="), ">=": (">", "<")}
# Binary operators and their precedence (higher binds tighter), for dropping a term safely.
PRECEDENCE = {"**": 12, "*": 11, "/": 11, "%": 11, "+": 10, "-": 10, "<<": 9, ">>": 9, "<<<": 9, ">>>": 9,
              "<": 8, "<=": 8, ">": 8, ">=": 8, "==": 7, "!=": 7, "===": 7, "!==": 7, "&": 6, "^": 5, "|": 4,
              "&&": 3, "||": 2, "?": 1, ":": 1}


@dataclasses.dataclass
class Token:
    kind: str
    text: str
    start: int
    end: int


@dataclasses.dataclass
class Mutant:
    file: str          # relative to rtl/
    module: str
    line: int
    start: int         # byte offsets of the replaced text in the file
    end: int
    original: str
    replacement: str
    operator: str      # relational, equality, logical, constant, drop, invert, stuck
    key: str = ""      # stable across unrelated edits: the file, the line before and after, which occurrence

    def apply(self, text):
        assert text[self.start:self.end] == self.original, "the file changed since the mutants were listed"
        return text[:self.start] + self.replacement + text[self.end:]

    def lines(self, text):
        """The mutated line, before and after."""
        begin = text.rfind("\n", 0, self.start) + 1
        end = text.find("\n", self.end)
        end = len(text) if end < 0 else end
        return text[begin:end], text[begin:self.start] + self.replacement + text[self.end:end]


def tokenize(text):
    tokens, pos = [], 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        kind = m.lastgroup
        if kind not in ("space", "comment"):
            tokens.append(Token(kind, m.group(), m.start(), m.end()))
        pos = m.end()
    return tokens


def literal_neighbours(text):
    """A literal's value one up and one down, in its own size and base (those that fit)."""
    if text in ("'0", "'1"):
        return ["'1" if text == "'0" else "'0"]
    m = re.fullmatch(r"(\d[\d_]*)?\s*'(s?)([bodhBODH])([0-9a-fA-F_]+)", text)
    if m:
        size, signed, base, digits = m.groups()
        radix = {"b": 2, "o": 8, "d": 10, "h": 16}[base.lower()]
        value = int(digits.replace("_", ""), radix)
        limit = 1 << int(size.replace("_", "")) if size else 1 << 32
        fmt = {2: "b", 8: "o", 10: "d", 16: "x"}[radix]
        return [f"{size or ''}'{signed}{base}{format(v, fmt)}" for v in (value + 1, value - 1) if 0 <= v < limit]
    if re.fullmatch(r"\d[\d_]*", text):
        value = int(text.replace("_", ""))
        return [str(v) for v in (value + 1, value - 1) if v >= 0]
    return []


def operand_end(tokens, i):
    """The index after the operand (a primary with its selects and calls) that starts at tokens[i],
    or None where it is not one this reading is sure of."""
    n = len(tokens)
    while i < n and tokens[i].text in ("!", "~", "-", "+") and tokens[i].kind == "op":
        i += 1
    if i >= n:
        return None
    t = tokens[i]
    if t.kind == "number":
        i += 1
        if i < n and tokens[i].text == "'":  # a cast: N'(x)
            i += 1
            if i >= n or tokens[i].text != "(":
                return None
            i = matching(tokens, i) + 1
        return i
    if t.text in ("(", "{"):
        i = matching(tokens, i) + 1
        if t.text == "(" and i + 1 < n and tokens[i].text == "'" and tokens[i + 1].text == "(":  # (W+1)'(x)
            i = matching(tokens, i + 1) + 1
    elif t.kind == "ident":
        i += 1
        while i + 1 < n and tokens[i].text in ("::", ".") and tokens[i + 1].kind == "ident":
            i += 2
        if i < n and tokens[i].text == "'":  # a cast to a type: T'(x)
            i += 1
            if i >= n or tokens[i].text != "(":
                return None
            i = matching(tokens, i) + 1
    else:
        return None
    while i < n and tokens[i].text in ("[", "("):
        i = matching(tokens, i) + 1
    return i


def term_end(tokens, i, precedence):
    """The index after the right operand of a binary operator of `precedence` whose operand starts
    at tokens[i]: operands joined by operators that bind tighter go with it (`a + b * c`: b * c)."""
    end = operand_end(tokens, i)
    while end is not None and end < len(tokens) and tokens[end].kind == "op" and \
            PRECEDENCE.get(tokens[end].text, 0) > precedence and tokens[end].text not in ("?", ":"):
        end = operand_end(tokens, end + 1)
    return end


def matching(tokens, i):
    """The index of the bracket closing tokens[i]."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    depth, close = 0, pairs[tokens[i].text]
    for j in range(i, len(tokens)):
        if tokens[j].text == tokens[i].text:
            depth += 1
        elif tokens[j].text == close:
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"unbalanced {tokens[i].text} at byte {tokens[i].start}")


def is_operand_end(t):
    return t.kind in ("ident", "number") or t.text in (")", "]", "}")


def mutants_of(name, text):
    """Every mutant of one RTL file."""
    tokens = tokenize(text)
    out = []
    module = "?"

    def add(start, end, replacement, operator):
        out.append(Mutant(name, module, text.count("\n", 0, start) + 1, start, end, text[start:end], replacement,
                          operator))

    # Regions to leave alone: simulation-only code, and the widths of ranges, part-selects and
    # replications; declarations are found statement by statement below.
    skip = [False] * len(tokens)
    cast_width = set()  # skipped, but a term dropped whole may hold them
    sim_depth = 0
    for i, t in enumerate(tokens):
        if t.kind == "directive":
            if t.text == "`ifndef" and i + 1 < len(tokens) and tokens[i + 1].text == "SYNTHESIS":
                sim_depth = 1
            elif sim_depth and t.text in ("`ifdef", "`ifndef"):
                sim_depth += 1
            elif sim_depth and t.text == "`endif":
                sim_depth -= 1
        if sim_depth:
            skip[i] = True
        if t.text == "[":
            close = matching(tokens, i)
            inner = tokens[i + 1:close]
            colon = next((k for k, u in enumerate(inner) if u.text in (":", "+:", "-:")), None)
            if colon is not None:
                first = 0 if inner[colon].text == ":" else colon  # [hi:lo] entirely; [base +: width] its width
                for k in range(i + 1 + first, close):
                    skip[k] = True
        if t.text == "'" and i > 0 and tokens[i - 1].text == ")":  # a cast's width: (W+1)'(x)
            depth = 0
            for k in range(i - 1, -1, -1):
                depth += {")": 1, "(": -1}.get(tokens[k].text, 0)
                skip[k] = True
                cast_width.add(k)
                if depth == 0:
                    break
        if t.text == "{" and i + 1 < len(tokens):
            nxt = tokens[i + 1]
            rep_end = matching(tokens, i + 1) + 1 if nxt.text == "(" else i + 2 if nxt.kind in ("number", "ident") else None
            if rep_end and rep_end < len(tokens) and tokens[rep_end].text == "{":
                for k in range(i + 1, rep_end):
                    skip[k] = True

    depth = 0               # brackets of any kind
    statement = []          # indices of the current statement's tokens at depth 0
    declaration = False
    assigned = False        # the statement's assignment operator seen
    header_close = set()    # where a header's closing paren is
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t.text in ("module", "package") and i + 1 < len(tokens):
            module = tokens[i + 1].text
        if depth == 0 and not statement:
            declaration = t.text in DECLARATION or (
                t.kind == "ident" and i + 3 < len(tokens) and tokens[i + 1].text == "::" and
                tokens[i + 2].kind == "ident" and tokens[i + 3].kind == "ident")
            assigned = False
        if depth == 0:
            statement.append(i)
        if t.text in ("(", "[", "{"):
            if t.text == "(" and i > 0 and tokens[i - 1].text in HEADER:
                header_close.add(matching(tokens, i))
            depth += 1
        elif t.text in (")", "]", "}"):
            depth -= 1
            if depth == 0 and i in header_close:
                header_close.discard(i)
                statement, assigned = [], False  # the statement after the header starts fresh
                declaration = False
                i += 1
                continue
        live = not skip[i] and not declaration
        if live and t.kind == "op" and t.text in ("=", "<=") and depth == 0 and not assigned:
            assigned = True  # an assignment, not a comparison
        elif live and t.kind == "op":
            binary = i > 0 and is_operand_end(tokens[i - 1])
            if t.text in RELATIONAL and binary:
                for r, op in zip(RELATIONAL[t.text], ("relational", "relational")):
                    add(t.start, t.end, r, op)
                # a named bound compared against (Rows, tsr_pkg::DIM_MAX): one up and one down
                end = operand_end(tokens, i + 1)
                bound = tokens[i + 1:end] if end else []
                cast = next((k for k in range(len(bound) - 1) if bound[k].text == "'" and bound[k + 1].text == "("), None)
                if cast is not None and matching(bound, cast + 1) == len(bound) - 1:
                    bound = bound[cast + 2:-1]  # within a cast: 16'(Rows), (W+1)'(Cols)
                if bound and all(u.kind == "ident" if k % 2 == 0 else u.text == "::" for k, u in enumerate(bound)) \
                        and len(bound) % 2 == 1 and bound[-1].text[0].isupper():
                    named = text[bound[0].start:bound[-1].end]
                    add(bound[0].start, bound[-1].end, f"({named} + 1)", "constant")
                    add(bound[0].start, bound[-1].end, f"({named} - 1)", "constant")
            elif t.text in ("==", "!=") and binary:
                add(t.start, t.end, "!=" if t.text == "==" else "==", "equality")
            elif t.text in ("&&", "||") and binary:
                add(t.start, t.end, "||" if t.text == "&&" else "&&", "logical")
            if t.text in ("+", "-", "&&", "||") and binary:
                end = term_end(tokens, i + 1, PRECEDENCE[t.text])
                if end is not None and not any(skip[k] and k not in cast_width for k in range(i, end)):
                    add(t.start, tokens[end - 1].end, "", "drop")
        elif live and t.kind == "number" and not (i + 1 < len(tokens) and tokens[i + 1].text == "'"):
            for r in literal_neighbours(t.text):
                add(t.start, t.end, r, "constant")
        if live and t.text == "if" and i + 1 < len(tokens) and tokens[i + 1].text == "(" and \
                text[tokens[i + 1].start + 1:tokens[matching(tokens, i + 1)].start].strip() != "!rst_ni":
            close = matching(tokens, i + 1)
            cond = text[tokens[i + 1].start + 1:tokens[close].start]
            add(tokens[i + 1].start, tokens[close].end, f"(!({cond}))", "invert")
            add(tokens[i + 1].start, tokens[close].end, "(1'b1)", "stuck")
            add(tokens[i + 1].start, tokens[close].end, "(1'b0)", "stuck")
        # an enable assigned: `assign x_en = ...;` or `x_en = ...;` in a block
        if live and t.kind == "ident" and ENABLE.search(t.text) and i + 1 < len(tokens) and \
                tokens[i + 1].text in ("=", "<=") and depth == 0 and not assigned:
            semi = next(k for k in range(i + 2, len(tokens)) if tokens[k].text == ";")
            rhs_start, rhs_end = tokens[i + 2].start, tokens[semi - 1].end
            for value in ("'0", "'1") if semi > i + 3 or tokens[i + 2].kind != "number" else ():
                add(rhs_start, rhs_end, value, "stuck")
        if depth == 0 and (t.text in STATEMENT_START or (t.text == ":" and not assigned)):
            statement, assigned, declaration = [], False, False
            if t.text != ":" and i + 2 < len(tokens) and tokens[i + 1].text == ":" and tokens[i + 2].kind == "ident":
                i += 2  # the block's label
        i += 1
    # The same change found twice (a literal that is also an enable's value) counts once.
    unique = {}
    for m in out:
        unique.setdefault((m.start, m.end, m.replacement), m)
    out = list(unique.values())
    # Stable keys: the file, the line as it was and as it becomes, and which such change it is.
    seen = {}
    for m in out:
        before, after = m.lines(text)
        base = f"{m.file}\n{before.strip()}\n{after.strip()}"
        seen[base] = seen.get(base, 0) + 1
        m.key = hashlib.sha1(f"{base}\n{seen[base]}".encode()).hexdigest()[:10]
    return out


def rtl_files(rtl_dir):
    """The synthesizable files of rtl/files.f that are not generated from the spec."""
    names = [n.strip() for n in (rtl_dir / "files.f").read_text().split() if n.strip()]
    return [n for n in names if "Generated by scripts/gen-spec" not in (rtl_dir / n).read_text()[:200]]


def all_mutants(rtl_dir):
    out = []
    for name in rtl_files(rtl_dir):
        out += mutants_of(name, (rtl_dir / name).read_text())
    return out
