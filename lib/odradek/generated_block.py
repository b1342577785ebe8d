"""A generated block of a Markdown file: the text between a BEGIN and an END marker comes from
code (the README's config tables, its list of served Kafka APIs), is rewritten by a command and
checked by a test, so that it cannot drift from what it describes.

``main`` is such a command's body: ``FILE`` rewrites the block in place, ``FILE --check`` exits
1 when it differs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable


def rewrite(text: str, begin: str, end: str, block: str) -> str:
    """``text`` with its block (markers included) replaced by ``block`` (markers included)."""
    start, stop = text.index(begin), text.index(end) + len(end)
    return text[:start] + block + text[stop:]


def main(argv: list[str] | None, prog: str, description: str, rewriter: Callable[[str], str],
         check_help: str) -> int:
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("readme", type=Path)
    p.add_argument("--check", action="store_true", help=check_help)
    a = p.parse_args(argv)
    text = a.readme.read_text()
    new = rewriter(text)
    if a.check:
        return int(new != text)
    a.readme.write_text(new)
    return 0
