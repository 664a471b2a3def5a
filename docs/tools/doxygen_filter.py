#!/usr/bin/env python3
"""Doxygen input filter for Samba's C headers (docs/Doxyfile, INPUT_FILTER).

The headers are written for C programmers: plain /* */ comments, one
comment above a function or above a few functions that belong together
(create and release), a comment after a field or a constant. This filter
tells Doxygen what a reader already sees, without changing the headers:

- the first comment of a file documents the file;
- a comment at column 0 directly above declarations documents each of them
  (a member group with the comment as the group's documentation);
- a comment after a declaration on the same line documents that line;
- a comment followed by a blank line (a section banner) stays a comment.

Line numbers are kept, so Doxygen's warnings point into the real header.
"""
import os
import re
import sys

DECLARATION = re.compile(r"^(SAMBA_API\b|#define\s|typedef\b|\s+\S.*;)")
TRAILING = re.compile(r"^(?P<code>[^/]*\S)(?P<space>\s*)/\*(?!\*)(?P<text>.*)\*/\s*$")


def comment_end(lines, i):
    """Index of the line that closes the comment opened on line i."""
    while "*/" not in lines[i]:
        i += 1
    return i


def declaration_run(lines, start):
    """Indices [start, end) of the declarations directly below a comment:
    up to a blank line, a comment at column 0 or a preprocessor conditional."""
    end = start
    while end < len(lines):
        line = lines[end]
        if not line.strip() or line.startswith("/*") or line.startswith(("#if", "#endif", "#else")):
            break
        end += 1
    return end


def filter_header(text, name):
    lines = text.split("\n")
    out = list(lines)
    first_comment = True
    closes = set()  # lines that a member group's close goes in front of
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("/*"):
            end = comment_end(lines, i)
            if first_comment:
                out[i] = "/** @file %s " % name + line[2:].lstrip()
                first_comment = False
            elif end + 1 < len(lines) and lines[end + 1].strip() and not lines[end + 1].startswith(("/*", "#if", "#endif")):
                run_end = declaration_run(lines, end + 1)
                decls = sum(1 for k in range(end + 1, run_end) if DECLARATION.match(lines[k]) and not lines[k].startswith(" "))
                out[i] = ("/**@{*/ " if decls > 1 else "") + "/**" + line[2:]
                if decls > 1:
                    closes.add(run_end)
            i = end + 1
            continue
        m = TRAILING.match(line)
        if m and not line.lstrip().startswith("/*"):
            out[i] = "%s%s/**<%s*/" % (m.group("code"), m.group("space"), m.group("text"))
        i += 1
    # On the line after the group, not after its last declaration: after a
    # #define the close would be read as part of the macro.
    for k in closes:
        if k < len(out):
            out[k] = "/**@}*/ " + out[k]
        else:
            out.append("/**@}*/")
    return "\n".join(out)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        sys.stdout.write(filter_header(f.read(), os.path.basename(sys.argv[1])))
