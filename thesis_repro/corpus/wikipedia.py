"""Wikipedia input: MediaWiki XML dumps, streamed, and their wikitext cleaned to paragraphs.

A dump (``.xml``, ``.xml.bz2``, ``...xml-p1p187037.bz2``; or any file whose head has the
``<mediawiki`` root) is streamed with ``xml.etree.ElementTree.iterparse``: the articles' wikitext
is stripped of markup by ``clean_wikitext`` and every remaining paragraph is one line of text
for the tokeniser.
"""

from __future__ import annotations

import html
import lzma
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

from thesis_repro.corpus.text import CorpusError, compression, open_text

__all__ = ["clean_wikitext", "is_wiki_dump", "wiki_lines"]

_WIKI_DROP_TAGS = "ref|math|gallery|timeline|syntaxhighlight|source|score|imagemap|graph|chem"
_WIKI_RULES: list[tuple[re.Pattern, str]] = [
    (re.compile(r"<!--.*?(?:-->|$)", re.S), ""),  # comments
    (re.compile(rf"<(?:{_WIKI_DROP_TAGS})\b[^>]*/>", re.I), ""),  # <ref name=x />
    (re.compile(rf"<({_WIKI_DROP_TAGS})\b[^>]*>.*?</\1\s*>", re.I | re.S), ""),  # <ref>..</ref>
]
_WIKI_TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")  # innermost {{...}}; repeated for nesting
_WIKI_TABLE = re.compile(r"\{\|(?:(?!\{\|).)*?\|\}", re.S)  # innermost {| ... |}
_WIKI_NS_LINK = re.compile(  # [[Plik:...]], [[Kategoria:...]], [[en:...]]: dropped
    r"\[\[\s*(?:file|image|media|plik|grafika|category|kategoria|[a-z]{2,3}(?:-[a-z]+)?)\s*:"
    r"[^\[\]]*\]\]",
    re.I,
)
_WIKI_LINK = re.compile(r"\[\[(?:[^\[\]|]*\|)*([^\[\]|]*)\]\]")  # [[a|b]] -> b, [[a]] -> a
_WIKI_EXT_LINK = re.compile(r"\[(?:https?:|ftp:)?//[^\s\]]*\s*([^\]]*)\]")  # [url label] -> label
_WIKI_LINE_RULES: list[tuple[re.Pattern, str]] = [
    (re.compile(r"^=+.*=+\s*$", re.M), ""),  # headings: dropped (like ELTeC's <head>)
    (re.compile(r"^[ \t]*[|!].*$", re.M), ""),  # table rows left over from broken tables
    (re.compile(r"^[*#:;]+\s*", re.M), ""),  # list and indent markers
    (re.compile(r"'{2,}"), ""),  # ''italic'', '''bold'''
    (re.compile(r"</?[a-zA-Z][^>]*>"), ""),  # remaining HTML tags (content kept)
    (re.compile(r"__[A-Z]+__"), ""),  # __TOC__ and other magic words
    (re.compile(r"[{}\[\]]{2,}"), ""),  # unbalanced leftovers of templates/links
]


def _sub_until_stable(pattern: re.Pattern, repl: str, text: str, max_rounds: int = 20) -> str:
    for _ in range(max_rounds):
        text, n = pattern.subn(repl, text)
        if not n:
            break
    return text


def clean_wikitext(text: str) -> list[str]:
    """Strip MediaWiki markup with regular expressions; return the non-empty paragraphs.

    In order: comments; ``<ref>``/``<math>``/``<gallery>``... elements with their content;
    templates ``{{...}}`` (nested: innermost first, repeatedly); tables ``{| ... |}``;
    file/image/category/interlanguage links ``[[Plik:...]]`` (dropped, also with nested links
    in captions); links ``[[target|label]]`` -> ``label`` and ``[[target]]`` -> ``target``;
    external links ``[url label]`` -> ``label``; heading lines ``== ... ==`` (dropped); table
    rows, list markers, ``''``/``'''`` quotes, other HTML tags (their text kept), magic words;
    HTML entities are unescaped. Each remaining line is one paragraph, whitespace collapsed.
    A regex cleaner is approximate (unlike a full parser), but needs nothing beyond the stdlib.
    """
    for pattern, repl in _WIKI_RULES:
        text = pattern.sub(repl, text)
    text = _sub_until_stable(_WIKI_TEMPLATE, "", text)
    text = _sub_until_stable(_WIKI_TABLE, "", text)
    for _ in range(10):  # links nest inside file captions: alternate the two rules
        text, n1 = _WIKI_NS_LINK.subn("", text)
        text, n2 = _WIKI_LINK.subn(r"\1", text)
        if not (n1 or n2):
            break
    text = _WIKI_EXT_LINK.sub(r"\1", text)
    for pattern, repl in _WIKI_LINE_RULES:
        text = pattern.sub(repl, text)
    text = html.unescape(text)
    lines = (" ".join(line.split()) for line in text.splitlines())
    return [line for line in lines if line]


def is_wiki_dump(path: Path) -> bool:
    """A MediaWiki XML dump? By name (``.xml`` before the compression suffix) or content."""
    base = path.name[: -len(compression(path))] if compression(path) else path.name
    if re.search(r"\.xml(?:-p\d+p\d+)?$", base, re.I):
        return True
    try:
        with open_text(path, "rb") as f:
            head = f.read(2048)
    except (OSError, EOFError, lzma.LZMAError):
        return False  # reported when the file is read as text
    return b"<mediawiki" in head


def wiki_lines(path: Path) -> Iterator[str]:
    """Cleaned paragraphs of the articles of a MediaWiki dump, streamed.

    Only main-namespace pages (``<ns>0</ns>``, or pages without ``<ns>``) are used; redirects
    (``#REDIRECT``/``#PATRZ``) are skipped.
    """
    try:
        with open_text(path, "rb") as f:
            context = ET.iterparse(f, events=("start", "end"))
            root = None
            text: str | None = None
            ns: str | None = None
            for event, elem in context:
                if root is None:
                    root = elem
                if event != "end":
                    continue
                tag = elem.tag.rsplit("}", 1)[-1]
                if tag == "text":
                    text = elem.text or ""
                elif tag == "ns":
                    ns = (elem.text or "").strip()
                elif tag == "page":
                    if (
                        text
                        and ns in (None, "0")
                        and not re.match(r"\s*#(redirect|patrz|przekieruj)", text, re.I)
                    ):
                        yield from clean_wikitext(text)
                    text = ns = None
                    root.clear()  # keep memory flat
    except ET.ParseError as e:
        raise CorpusError(f"file {path} is not a valid XML dump: {e}") from None
    except (EOFError, lzma.LZMAError, OSError) as e:
        raise CorpusError(f"cannot read {path}: {e}") from None
