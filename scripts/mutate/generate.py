"""Mutants of the reference mechanisms, generated on clang's AST (libclang).

Each mutant is one small change a real bug could be: an operator replaced, a
condition negated or forced, a constant moved by one, a call whose result is
ignored deleted, a return value replaced, a lock guard removed. It is found
again by what it changes, not where: its id hashes the file, the enclosing
function (clang's USR), the operator, the tokens it replaces, what replaces
them and how many identical sites precede it in that function. A reformat or a
function moved within its file keeps every id; an edit of the function's code
changes only the ids of the sites it touched (and of later identical ones).
"""
import hashlib
import json
import pathlib
import shlex

import clang.cindex as ci

LIBCLANG = "/usr/lib/x86_64-linux-gnu/libclang-14.so.1"
if not ci.Config.loaded:
    ci.Config.set_library_file(LIBCLANG)
K = ci.CursorKind

RELATIONAL = {"<": [">="], "<=": [">"], ">": ["<="], ">=": ["<"]}
BOUNDARY = {"<": ["<="], "<=": ["<"], ">": [">="], ">=": [">"]}
EQUALITY = {"==": ["!="], "!=": ["=="]}
ARITHMETIC = {"+": ["-"], "-": ["+"], "*": ["/"], "/": ["*"], "%": ["*"], "+=": ["-="], "-=": ["+="],
              "*=": ["/="], "/=": ["*="]}
LOGICAL = {"&&": ["||"], "||": ["&&"]}
OPERATORS = ("relational", "boundary", "equality", "arithmetic", "logical", "condition", "constant", "call-deletion",
             "return-value", "lock-removal")
# Guards whose removal leaves the guarded code unsynchronised.
LOCK_TYPES = ("lock_guard", "unique_lock", "scoped_lock", "shared_lock", "SpinLockGuard", "LockGuard")
# A lambda's sites belong to the function it is written in.
FUNCTIONS = {K.FUNCTION_DECL, K.CXX_METHOD, K.CONSTRUCTOR, K.DESTRUCTOR, K.CONVERSION_FUNCTION, K.FUNCTION_TEMPLATE}


class Mutant(dict):
    """id, file, line, function, operator, original, replacement, start, end
    (byte offsets into the file as it is now)."""


def compile_args(compile_commands, path):
    """The flags the build compiles `path` with (its own entry, or for a
    header the entry of a source beside it), for libclang."""
    entries = json.loads(pathlib.Path(compile_commands).read_text())
    by_file = {pathlib.Path(entry["file"]).resolve(): entry for entry in entries}
    entry = by_file.get(path.resolve())
    if entry is None:  # a header: borrow a neighbour's flags
        entry = next((e for f, e in by_file.items() if f.parent == path.resolve().parent), None)
        if entry is None:
            entry = next(e for f, e in by_file.items() if "/reference/src/" in str(f))
    words = iter(shlex.split(entry["command"]) if "command" in entry else entry["arguments"])
    next(words)  # the compiler
    keep = []
    for word in words:
        if word in ("-o", "-c", "-MF", "-MT", "-MQ"):
            next(words, None)  # and its file
        elif word in ("-isystem", "-include"):
            argument = next(words, "")
            # A precompiled header cannot be read by another clang than the one that wrote it.
            if not argument.endswith((".gch", "cmake_pch.hxx")):
                keep += [word, argument]
        elif word.startswith(("-I", "-D", "-std=", "-isystem")):
            keep.append(word)
    return keep + ["-x", "c++"]


def _spellings(source, start, end):
    from mutate import tokens  # the same lexing the curated mutants use
    return " ".join(spelling for spelling, _, _ in tokens.tokenize(source[start:end]))


def _operator_token(cursor):
    """(spelling, start, end) of a binary operator's token: the first token
    after its left operand."""
    children = list(cursor.get_children())
    if len(children) != 2:
        return None
    lhs_end = children[0].extent.end.offset
    for token in cursor.get_tokens():
        if token.extent.start.offset >= lhs_end:
            return token.spelling, token.extent.start.offset, token.extent.end.offset
    return None


def _sites(cursor, source, filename, function, out):
    """Appends (function, operator, start, end, replacement) for every site under `cursor`."""
    for child in cursor.get_children():
        location = child.location
        if location.file is not None and location.file.name != filename:
            continue
        scope = (child.get_usr() or function) if child.kind in FUNCTIONS else function
        if scope is not None:
            _mutations_at(child, cursor, source, scope, out)
        _sites(child, source, filename, scope, out)


def _mutations_at(cursor, parent, source, function, out):
    kind = cursor.kind
    if kind in (K.BINARY_OPERATOR, K.COMPOUND_ASSIGNMENT_OPERATOR):
        token = _operator_token(cursor)
        if token is None:
            return
        spelling, start, end = token
        for name, table in (("relational", RELATIONAL), ("boundary", BOUNDARY), ("equality", EQUALITY),
                            ("arithmetic", ARITHMETIC), ("logical", LOGICAL)):
            for replacement in table.get(spelling, []):
                out.append((function, name, start, end, replacement))
    elif kind in (K.IF_STMT, K.WHILE_STMT, K.DO_STMT, K.CONDITIONAL_OPERATOR, K.FOR_STMT):
        condition = _condition_of(cursor)
        if condition is not None:
            start, end = condition.extent.start.offset, condition.extent.end.offset
            text = source[start:end]
            # Negating one comparison is its operator's own mutant (== to !=, < to >=).
            flips = condition.kind == K.BINARY_OPERATOR and (_operator_token(condition) or ("",))[0] in (
                *RELATIONAL, *EQUALITY)
            for replacement in (["true", "false"] if flips else [f"!({text})", "true", "false"]):
                out.append((function, "condition", start, end, replacement))
    elif kind == K.INTEGER_LITERAL:
        start, end = cursor.extent.start.offset, cursor.extent.end.offset
        text = source[start:end]
        digits = text.rstrip("uUlLzZ")
        suffix = text[len(digits):]
        try:
            value = int(digits.replace("'", ""), 0)
        except ValueError:
            return
        parent_kinds = {p.kind for p in _ancestors(cursor, 2)}
        if parent_kinds & {K.ENUM_CONSTANT_DECL, K.STATIC_ASSERT, K.TEMPLATE_NON_TYPE_PARAMETER}:
            return
        out.append((function, "constant", start, end, f"{value + 1}{suffix}"))
        if value > 0:
            out.append((function, "constant", start, end, f"{value - 1}{suffix}"))
    elif kind == K.CALL_EXPR and parent.kind == K.COMPOUND_STMT:  # a call whose value nobody reads
        referenced = cursor.referenced
        if referenced is not None and referenced.kind == K.CONSTRUCTOR:
            return
        start, end = cursor.extent.start.offset, cursor.extent.end.offset
        out.append((function, "call-deletion", start, end, "static_cast<void>(0)"))
    elif kind == K.RETURN_STMT:
        children = list(cursor.get_children())
        if len(children) != 1:
            return
        value = children[0]
        start, end = value.extent.start.offset, value.extent.end.offset
        text = source[start:end].strip()
        type_kind = value.type.get_canonical().kind
        if type_kind == ci.TypeKind.BOOL:
            candidates = ["true", "false"]
        elif type_kind in (ci.TypeKind.INT, ci.TypeKind.UINT, ci.TypeKind.LONG, ci.TypeKind.ULONG,
                           ci.TypeKind.LONGLONG, ci.TypeKind.ULONGLONG, ci.TypeKind.USHORT, ci.TypeKind.SHORT,
                           ci.TypeKind.UCHAR, ci.TypeKind.CHAR_S, ci.TypeKind.SCHAR):
            candidates = ["0"]
        elif type_kind == ci.TypeKind.POINTER:
            candidates = ["nullptr"]
        else:
            return
        for replacement in candidates:
            if replacement != text:
                out.append((function, "return-value", start, end, replacement))
    elif kind == K.DECL_STMT:
        declarations = list(cursor.get_children())
        if len(declarations) == 1 and declarations[0].kind == K.VAR_DECL and any(
                name in declarations[0].type.spelling for name in LOCK_TYPES):
            out.append((function, "lock-removal", cursor.extent.start.offset, cursor.extent.end.offset, ";"))


def _condition_of(cursor):
    children = list(cursor.get_children())
    if cursor.kind == K.DO_STMT:
        candidate = children[-1] if children else None
    elif cursor.kind == K.FOR_STMT:
        # for (init; cond; step) body: libclang drops empty parts, so take the
        # one child that is an expression between two semicolons only when all four are there.
        candidate = children[1] if len(children) == 4 else None
    else:
        candidate = children[0] if children else None
    if candidate is None or candidate.kind in (K.VAR_DECL, K.DECL_STMT, K.COMPOUND_STMT):
        return None
    if not candidate.kind.is_expression():
        return None
    return candidate


def _ancestors(cursor, depth):
    found, current = [], cursor.semantic_parent
    while current is not None and len(found) < depth:
        found.append(current)
        current = current.semantic_parent
    return found


def mutants_of(path, root, compile_commands, text=None):
    """The mutants of `path` (a file under `root`), in file order; of `text`
    in its place when given (the file itself is not touched)."""
    path = pathlib.Path(path)
    source = path.read_text() if text is None else text
    if len(source) != len(source.encode("utf-8")):
        raise ValueError(f"{path}: only ASCII sources are mutated (libclang's offsets are bytes)")
    index = ci.Index.create()
    unit = index.parse(str(path), args=compile_args(compile_commands, path),
                       unsaved_files=None if text is None else [(str(path), text)],
                       options=ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD)
    errors = [d for d in unit.diagnostics if d.severity >= ci.Diagnostic.Error]
    if errors:
        raise ValueError(f"{path}: libclang cannot parse it: {errors[0]}")
    sites = []
    _sites(unit.cursor, source, str(path), None, sites)
    relative = str(path.resolve().relative_to(pathlib.Path(root).resolve()))
    mutants, seen, taken = [], {}, set()
    for function, operator, start, end, replacement in sorted(set(sites), key=lambda s: (s[2], s[3], s[1], s[4])):
        if (start, end, replacement) in taken:  # two operators proposing the same edit
            continue
        taken.add((start, end, replacement))
        # Tokens, not text, on both sides: a negated condition carries its text.
        original = _spellings(source, start, end)
        key = (function, operator, original, _spellings(replacement, 0, len(replacement)))
        ordinal = seen.get(key, 0)
        seen[key] = ordinal + 1
        digest = hashlib.sha256("\x1f".join([relative, *key, str(ordinal)]).encode()).hexdigest()[:12]
        mutants.append(Mutant(id=digest, file=relative, line=source.count("\n", 0, start) + 1, function=function,
                              operator=operator, original=source[start:end], replacement=replacement,
                              start=start, end=end))
    return mutants


def apply(source, mutant):
    return source[:mutant["start"]] + mutant["replacement"] + source[mutant["end"]:]
