"""C++ names as their users write them: Itanium ABI names demangled (libstdc++'s
demangler, through cxxfilt), the standard library's default template arguments and a
function template's encoded return type dropped."""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The C++ (Itanium ABI) name ``name`` stands for, through libstdc++'s
    ``abi::__cxa_demangle`` (the cxxfilt package); other names unchanged.

    ``_ZN4grid5fieldE`` → ``grid::field``; ``_ZN6MatrixC2Em`` →
    ``Matrix::Matrix(unsigned long)``; ``main``, ``field_`` (Fortran) → themselves.
    """
    if not name.startswith("_Z"):
        return name
    base, at, version = name.partition("@")  # symbol versions: _Znwm@@GLIBCXX_3.4
    try:
        import cxxfilt

        out = cxxfilt.demangle(base, external_only=True)
    except Exception:  # noqa: BLE001 - not a valid mangled name, or no demangler: as is
        return name
    return out + at + version if out else name


# trailing template arguments that only repeat a standard template's default
_DEFAULT_ARG = re.compile(r"^std::(allocator|char_traits|default_delete|less|hash|equal_to)<")


@lru_cache(maxsize=65536)
def readable(name: str) -> str:
    """A demangled C++ name as its user would write it: template arguments that are the
    standard library's defaults dropped (``std::vector<double, std::allocator<double> >``
    → ``std::vector<double>``, ``std::map<K, V, std::less<K>, ...>`` → ``std::map<K, V>``,
    ``std::__cxx11::basic_string<char, ...>`` → ``std::string``), and the return type
    the Itanium ABI encodes for a function template removed (``double* alloc_array<double>
    (unsigned long)`` → ``alloc_array<double>(unsigned long)``).  Names without template
    arguments, and operators (``operator<``), are unchanged."""
    if "<" not in name or re.search(r"operator\s*[<>-]", name):
        return name
    try:
        out = _template_args_shortened(name.replace("(anonymous namespace)", "\0"))
    except ValueError:  # unbalanced: not a name this understands
        return name
    out = re.sub(r"std::__(?:cxx11|1)::", "std::", out)
    out = out.replace("std::basic_string<char>", "std::string").replace("std::basic_string<wchar_t>", "std::wstring")
    return _without_return_type(out).replace("\0", "(anonymous namespace)")


def _template_args_shortened(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "<":
            args, i = _template_args(text, i + 1)
            out.append("<" + ", ".join(args) + ">")
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _template_args(text: str, i: int) -> tuple[list[str], int]:
    """The arguments of the template argument list opening before ``text[i]``, each
    shortened, trailing defaults dropped; and the index after its ``>``."""
    args: list[str] = []
    cur: list[str] = []
    depth = 0  # parentheses and brackets inside an argument (function types, arrays)
    while i < len(text):
        c = text[i]
        if c == "<":
            sub, i = _template_args(text, i + 1)
            cur.append("<" + ", ".join(sub) + ">")
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and c in ",>":
            args.append("".join(cur).strip())
            cur = []
            if c == ">":
                while len(args) > 1 and _DEFAULT_ARG.match(args[-1]):
                    args.pop()
                return args, i + 1
            i += 1
            continue
        cur.append(c)
        i += 1
    raise ValueError("unbalanced template arguments")


def _without_return_type(name: str) -> str:
    """``RET f<T>(...)`` → ``f<T>(...)``: a top-level space before the name of a function
    template (whose name, before its parameters, ends in ``>``)."""
    depth, paren = 0, -1
    for k, c in enumerate(name):
        if c in "<{[":
            depth += 1
        elif c in ">}]":
            depth -= 1
        elif c == "(" and depth == 0:
            paren = k
            break
    if paren <= 0 or name[paren - 1] != ">":
        return name
    depth, space = 0, -1
    for k in range(paren - 1, -1, -1):
        c = name[k]
        if c in ">}]":
            depth += 1
        elif c in "<{[":
            depth -= 1
        elif c == " " and depth == 0:
            space = k
            break
    return name[space + 1:] if space >= 0 else name
