"""C++ source as a token sequence, so an edit is found by what the code says
rather than by how it is laid out.

A curated mutant names its edit as source text (`find`). Matching that text
byte for byte breaks at the first reformat; matching its tokens does not: a
formatter changes whitespace, line breaks and comment layout, never the
tokens. So `locate` lexes the file and the snippet the same way (comments and
whitespace dropped) and finds the one place the snippet's tokens occur.
"""
import re

# Longest operators first, so `<<=` is one token and not `<<` then `=`.
_PUNCTUATORS = sorted("""
>>= <<= ->* ... <=> :: -> ++ -- << >> <= >= == != && || += -= *= /= %= &= |= ^= .*
{ } [ ] ( ) ; : , . ? ~ ! + - * / % ^ & | = < > #
""".split(), key=len, reverse=True)
_TOKEN = re.compile(
    r"""
    (?P<space>(?:\s|\\\n)+)  # a line splice (backslash, newline) is layout too
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<raw>R"(?P<delim>[^(\s]*)\(.*?\)(?P=delim)")
  | (?P<string>(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*")
  | (?P<char>(?:u8|u|U|L)?'(?:\\.|[^'\\\n])+')
  | (?P<number>\.?\d(?:[\w.']|[eEpP][+-])*)
  | (?P<word>[A-Za-z_]\w*)
  | (?P<punct>""" + "|".join(re.escape(p) for p in _PUNCTUATORS) + r""")
    """,
    re.VERBOSE | re.DOTALL,
)


def tokenize(text):
    """[(spelling, start, end)] of `text`'s tokens, comments and whitespace left out.
    Raises ValueError at a character no C++ token starts with."""
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            line = text.count("\n", 0, position) + 1
            raise ValueError(f"line {line}: no C++ token starts at {text[position:position + 20]!r}")
        if match.group() == ">>":
            # `>>` closes two templates as well as `> >` does, and formatters
            # write either: it is two tokens here, whatever it means there.
            tokens += [(">", match.start(), match.start() + 1), (">", match.start() + 1, match.end())]
        elif match.lastgroup not in ("space", "comment"):
            tokens.append((match.group(), match.start(), match.end()))
        position = match.end()
    return tokens


def locate(text, snippet):
    """Every (start, end) byte span of `text` whose tokens are exactly `snippet`'s.

    A snippet that is not whole tokens (part of a string literal: a message's
    wording) is found inside the string literals instead, which a formatter
    leaves as they are."""
    try:
        wanted = [spelling for spelling, _, _ in tokenize(snippet)]
    except ValueError:
        wanted = []
    tokens = tokenize(text)
    if not wanted:
        return [(start + offset, start + offset + len(snippet))
                for spelling, start, _ in tokens if spelling.endswith('"')
                for offset in _occurrences(spelling, snippet)]
    spellings = [spelling for spelling, _, _ in tokens]
    found = []
    for index in range(len(tokens) - len(wanted) + 1):
        if spellings[index:index + len(wanted)] == wanted:
            found.append((tokens[index][1], tokens[index + len(wanted) - 1][2]))
    return found


def _occurrences(haystack, needle):
    start = haystack.find(needle)
    while start != -1:
        yield start
        start = haystack.find(needle, start + 1)
