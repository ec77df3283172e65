"""Tests of thesis_repro.corpus: tokenisation, vocabulary, split, formats, cache, errors.

All inputs are tiny files written to tmp_path; nothing touches the network except a loopback
address that refuses connections.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import math
import os
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from thesis_repro import corpus as C
from thesis_repro.corpus import Corpus, CorpusError, load_corpus, synthetic_corpus, tokenize
from thesis_repro.corpus import prepare as P
from thesis_repro.corpus import text as T

_WRITERS = {".xz": lzma.open, ".gz": gzip.open, ".bz2": bz2.open}


def write_text(path: Path, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path``, compressed according to its suffix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = _WRITERS.get(path.suffix, open)
    with opener(path, "wt", encoding="utf-8") as f:
        f.write(text)
    return path


def block_text(n: int = 700, per_line: int = 10, n_labels: int = 12) -> str:
    """``n`` tokens; token i is ``b{(i // 50) % n_labels}``, ``per_line`` tokens per line."""
    words = [f"b{(i // 50) % n_labels}" for i in range(n)]
    return "".join(" ".join(words[i : i + per_line]) + "\n" for i in range(0, n, per_line))


def cache_files(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.rglob("*") if p.is_file())


def load(path: Path, cache: Path, **kw) -> Corpus:
    kw.setdefault("progress", False)
    return load_corpus(path, cache_dir=cache, **kw)


# ----------------------------------------------------------------------------------------------
# Tokenisation
# ----------------------------------------------------------------------------------------------


def test_tokenize_regex_default() -> None:
    text = "Wokulski, pan-brat; don't! „Lalka”… W 1878 r."
    assert tokenize(text) == [
        "wokulski",
        ",",
        "pan-brat",
        ";",
        "don't",
        "!",
        "„",
        "lalka",
        "”",
        "…",
        "w",
        "1878",
        "r",
        ".",
    ]


def test_tokenize_options() -> None:
    assert tokenize("Ala ma-kota.", lowercase=False) == ["Ala", "ma-kota", "."]
    assert tokenize(" Mr. <unk> said N ", tokenizer="whitespace") == ["mr.", "<unk>", "said", "n"]
    assert tokenize("Mr. said", tokenizer="whitespace", lowercase=False) == ["Mr.", "said"]
    # the corpus's own unknown-word token stays whole with the regex tokenizer too
    assert tokenize("a <unk> b <UNK>", lowercase=False) == ["a", "<unk>", "b", "<UNK>"]
    with pytest.raises(CorpusError, match="unknown tokenizer"):
        tokenize("a", tokenizer="bpe")


# ----------------------------------------------------------------------------------------------
# Vocabulary, UNK, split, cap
# ----------------------------------------------------------------------------------------------


def make_folder(folder: Path, train: str, valid: str, test: str, names: str = "{}.txt") -> Path:
    for part, text in (("train", train), ("valid", valid), ("test", test)):
        write_text(folder / names.format(part), text)
    return folder


def test_vocab_min_count_order_and_unk(tmp_path: Path) -> None:
    # counts in train: z 9, y 6, <eos> 4, q 3, x 3, w 1
    train = "x y z y z z q\n" * 3 + "w\n"
    heldout = "x y unknownword\n" * 7  # 28 tokens each
    folder = make_folder(tmp_path / "c", train, heldout, heldout)
    c = load(folder, tmp_path / "cache", min_count=3)
    assert c.vocab == ["<UNK>", "z", "y", "<eos>", "q", "x"]
    assert c.word_to_id["z"] == 1 and c.word_to_id["x"] == 5
    assert c.decode(c.train[:8]) == ["x", "y", "z", "y", "z", "z", "q", "<eos>"]
    assert c.train[-2] == 0  # "w" seen once < 3 -> <UNK>
    assert c.valid.dtype == np.int32
    assert c.valid[:4].tolist() == [5, 2, 0, 3]  # x y <UNK> <eos>
    c4 = load(folder, tmp_path / "cache", min_count=4)
    assert c4.vocab == ["<UNK>", "z", "y", "<eos>"]
    c_no_eos = load(folder, tmp_path / "cache", min_count=3, eos=None)
    assert c_no_eos.vocab == ["<UNK>", "z", "y", "q", "x"]
    assert len(c_no_eos.train) == 22


def test_encode_decode(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "c", "Ala ma kota .\n" * 10, "Ala ma psa\n" * 7, "kot\n" * 14)
    c = load(folder, tmp_path / "cache", min_count=1)
    ids = c.encode("Ala ma psa!")
    assert ids.dtype == np.int32
    assert c.decode(ids) == ["ala", "ma", "<UNK>", "<UNK>"]
    assert c.encode(["kota", "nic"]).tolist() == [c.word_to_id["kota"], 0]
    assert c.vocab_size == len(c.vocab) == 6  # <UNK> ala ma kota . <eos>


def test_running_split_sizes_and_order(tmp_path: Path) -> None:
    path = write_text(tmp_path / "blocks.txt", block_text(700))
    c = load(path, tmp_path / "cache", min_count=1, eos=None)
    assert (len(c.train), len(c.valid), len(c.test)) == (600, 50, 50)
    train = c.decode(c.train)
    assert train == [f"b{i // 50}" for i in range(600)]
    assert set(c.decode(c.valid)) == {"b0"}  # block 12 -> label 12 % 12
    assert set(c.decode(c.test)) == {"b1"}  # block 13
    assert c.settings["format"] == "text"


def test_max_words_cap_before_split(tmp_path: Path) -> None:
    path = write_text(tmp_path / "blocks.txt", block_text(700, n_labels=6))
    c = load(path, tmp_path / "cache", min_count=1, eos=None, max_words=350)
    assert (len(c.train), len(c.valid), len(c.test)) == (300, 25, 25)
    assert c.decode(c.train) == [f"b{i // 50}" for i in range(300)]
    # tokens 300..349 are block 6 (label b0); without the cap valid would be block 12
    assert set(c.decode(c.valid)) == {"b0"} and set(c.decode(c.test)) == {"b0"}
    assert c.settings["max_words"] == 350


def test_folder_cap_is_proportional(tmp_path: Path) -> None:
    folder = make_folder(
        tmp_path / "c", "a b c d\n" * 100, "a b c d\n" * 25, "a b c d\n" * 25, "ptb.{}.txt"
    )
    c = load(folder, tmp_path / "cache", min_count=1, tokenizer="whitespace", max_words=300)
    # 500 / 125 / 125 tokens (with <eos>) -> 300 / 750 of each part
    assert (len(c.train), len(c.valid), len(c.test)) == (200, 50, 50)
    assert c.settings["words_before_cap"] == {"train": 500, "valid": 125, "test": 125}


# ----------------------------------------------------------------------------------------------
# File formats
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".txt", ".txt.xz", ".txt.gz", ".txt.bz2"])
def test_plain_and_compressed_files_agree(tmp_path: Path, suffix: str) -> None:
    text = "Pierwsza linia, z przecinkiem.\n\nDruga — linia!\n" * 40
    ref = load(write_text(tmp_path / "ref.txt", text), tmp_path / "cache", min_count=2)
    c = load(write_text(tmp_path / f"corpus{suffix}", text), tmp_path / "cache", min_count=2)
    assert c.vocab == ref.vocab
    for part in ("train", "valid", "test"):
        np.testing.assert_array_equal(getattr(c, part), getattr(ref, part))
    # 6 + 4 tokens and an <eos> per non-empty line; the empty line gives nothing
    assert len(c.train) + len(c.valid) + len(c.test) == 40 * (7 + 5)
    assert "<eos>" in c.vocab and "pierwsza" in c.vocab and "—" in c.vocab


def test_ptb_style_folder_compressed_with_unk(tmp_path: Path) -> None:
    line = " the <unk> rose N % in N <unk> \n"
    folder = make_folder(tmp_path / "ptb", line * 30, line * 5, " the cat \n" * 10, "ptb.{}.txt.gz")
    c = load(folder, tmp_path / "cache", min_count=1, tokenizer="whitespace", lowercase=False)
    assert c.settings["format"] == "folder"
    assert c.settings["files"]["train"] == "ptb.train.txt.gz"
    assert "<unk>" not in c.vocab and c.vocab[0] == "<UNK>"
    # N 60; then count 30 each, in code-point order
    assert c.vocab == ["<UNK>", "N", "%", "<eos>", "in", "rose", "the"]
    assert c.decode(c.train[:9]) == ["the", "<UNK>", "rose", "N", "%", "in", "N", "<UNK>", "<eos>"]
    assert c.decode(c.test[:3]) == ["the", "<UNK>", "<eos>"]  # cat: not in train


WIKI_PAGE = """
<page><title>{title}</title><ns>{ns}</ns><id>{id}</id>
<revision><id>1</id><text bytes="1" xml:space="preserve">{text}</text></revision></page>"""

WIKI_ARTICLE = """{{{{Infobox miasto|nazwa=Gród|{{{{lang|pl}}}}}}}}'''Gród''' to ''stare'' \
[[Miasto|miasto]] nad [[Wisła|Wisłą]] i [[rzeka]].&lt;ref name="a"&gt;Przypis tajny.&lt;/ref&gt;
== Historia ==
Założone w roku 1200 przez [[Bolesław|księcia]]&lt;ref&gt;inny przypis&lt;/ref&gt;.
[[Plik:Herb.svg|mały|Herb z [[orzeł|orłem]] tajnym]]
{{| class="wikitable"
|-
| komórka || tabelka
|}}
* punkt listy &lt;small&gt;mały&lt;/small&gt; [https://example.org strona]
[[Kategoria:Miasta]]
"""


def wiki_dump(n_articles: int = 30) -> str:
    pages = [
        WIKI_PAGE.format(title="Przekierowanie", ns=0, id=1, text="#PATRZ [[Gród]] ukryte"),
        WIKI_PAGE.format(title="Dyskusja:Gród", ns=1, id=2, text="dyskusja niewidoczna"),
    ]
    pages += [
        WIKI_PAGE.format(title=f"Gród {i}", ns=0, id=10 + i, text=WIKI_ARTICLE)
        for i in range(n_articles)
    ]
    return (
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" xml:lang="pl">\n'
        "<siteinfo><sitename>Wikipedia</sitename><namespaces><namespace key='0'/></namespaces>"
        "</siteinfo>" + "".join(pages) + "\n</mediawiki>\n"
    )


def test_wiki_xml_bz2_dump(tmp_path: Path) -> None:
    path = write_text(tmp_path / "plwiki-test-pages-articles1.xml-p1p99.bz2", wiki_dump())
    c = load(path, tmp_path / "cache", min_count=1)
    assert c.settings["format"] == "wiki-xml"
    words = c.decode(np.concatenate([c.train, c.valid, c.test]))
    first = words[: words.index("<eos>") + 1]
    assert first == "gród to stare miasto nad wisłą i rzeka . <eos>".split()
    text = " ".join(words)
    assert "założone w roku 1200 przez księcia . <eos> punkt listy mały strona <eos>" in text
    for hidden in ("infobox", "przypis", "tajny", "historia", "herb", "komórka", "tabelka"):
        assert hidden not in c.vocab, hidden
    for hidden in ("kategoria", "miasta", "ukryte", "dyskusja", "niewidoczna", "https"):
        assert hidden not in c.vocab, hidden
    assert not set("{}[]|'=<>") & set(c.vocab)


def test_wiki_detected_by_content_and_plain_xml(tmp_path: Path) -> None:
    path = write_text(tmp_path / "dump.dat", wiki_dump())
    c = load(path, tmp_path / "cache", min_count=1)
    assert c.settings["format"] == "wiki-xml"
    assert "wisłą" in c.vocab


def test_clean_wikitext_rules() -> None:
    assert C.clean_wikitext("a {{t|{{u}}}} b [[x|y]] [[z]] '''c''' <b>d</b>") == ["a b y z c d"]
    assert C.clean_wikitext("== H ==\n[[Category:K]]\n&amp; e<ref>r</ref>") == ["& e"]


# ----------------------------------------------------------------------------------------------
# Cache
# ----------------------------------------------------------------------------------------------


def _raise_tokenizer(*args, **kwargs):
    raise AssertionError("re-tokenised although the corpus is cached")


def test_cache_hit_does_not_retokenise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_text(tmp_path / "blocks.txt.gz", block_text(700))
    cache = tmp_path / "cache"
    first = load(path, cache, min_count=1)
    assert first.cache_file and Path(first.cache_file).is_file()
    assert cache_files(cache) == [Path(first.cache_file).name]
    monkeypatch.setattr(P, "make_tokenizer", _raise_tokenizer)
    second = load(path, cache, min_count=1)
    assert second.vocab == first.vocab and second.settings == first.settings
    assert second.source == first.source
    for part in ("train", "valid", "test"):
        np.testing.assert_array_equal(getattr(second, part), getattr(first, part))
        assert getattr(second, part).dtype == np.int32
    # any changed setting is a different cache entry: it must tokenise again
    for changed in (
        {"min_count": 2},
        {"max_words": 600},
        {"eos": None},
        {"lowercase": False},
        {"split": (8, 1, 1)},
    ):
        with pytest.raises(AssertionError, match="re-tokenised"):
            load(path, cache, **{"min_count": 1, **changed})


def test_cache_key_depends_on_file_and_settings(tmp_path: Path) -> None:
    path = write_text(tmp_path / "a.txt", block_text(700))
    base = {
        "tokenizer": "regex",
        "lowercase": True,
        "min_count": 1,
        "max_words": 700,
        "eos": "<eos>",
        "split": [6.0, 0.5, 0.5],
    }
    key = P._cache_file(tmp_path, path, base)
    assert P._cache_file(tmp_path, path, dict(base)) == key
    for name, value in [("tokenizer", "whitespace"), ("max_words", 7), ("split", [8, 1, 1])]:
        assert P._cache_file(tmp_path, path, {**base, name: value}) != key
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched -> new key
    assert P._cache_file(tmp_path, path, base) != key
    other = write_text(tmp_path / "sub" / "a.txt", block_text(700))
    os.utime(other, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))
    assert P._cache_file(tmp_path, other, base) != P._cache_file(tmp_path, path, base)


def test_failure_mid_preparation_leaves_no_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_text(tmp_path / "blocks.txt", block_text(700))
    cache = tmp_path / "cache"
    real = T.make_tokenizer

    def failing_tokenizer(*args, **kwargs):
        tok = real(*args, **kwargs)
        calls = [0]

        def f(line: str) -> list[str]:
            calls[0] += 1
            if calls[0] > 30:
                raise KeyboardInterrupt  # e.g. Ctrl-C half-way
            return tok(line)

        return f

    monkeypatch.setattr(P, "make_tokenizer", failing_tokenizer)
    with pytest.raises(KeyboardInterrupt):
        load(path, cache)
    assert cache_files(cache) == []


def test_failure_while_writing_cache_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_text(tmp_path / "blocks.txt", block_text(700))
    cache = tmp_path / "cache"

    def broken_savez(f, **arrays):
        f.write(b"PK\x03\x04 half a zip")
        raise OSError("disk full")

    monkeypatch.setattr(P.np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        load(path, cache, min_count=1)
    assert cache_files(cache) == []
    monkeypatch.undo()
    c = load(path, cache, min_count=1)
    assert len(cache_files(cache)) == 1 and len(c.train) > 0


def test_corrupt_cache_file_is_rebuilt(tmp_path: Path) -> None:
    path = write_text(tmp_path / "blocks.txt", block_text(700))
    cache = tmp_path / "cache"
    first = load(path, cache, min_count=1)
    Path(first.cache_file).write_bytes(b"garbage")
    again = load(path, cache, min_count=1)
    np.testing.assert_array_equal(again.train, first.train)
    assert np.load(first.cache_file)["train"].shape == first.train.shape


def test_default_cache_dir_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THESIS_REPRO_CACHE", str(tmp_path / "envcache"))
    assert C.default_cache_dir() == tmp_path / "envcache"
    path = write_text(tmp_path / "blocks.txt", block_text(700))
    c = load_corpus(path, min_count=1, progress=False)
    assert Path(c.cache_file).parent == tmp_path / "envcache" / "corpora"
    monkeypatch.delenv("THESIS_REPRO_CACHE")
    assert C.default_cache_dir() == Path.home() / ".cache" / "thesis_repro"


def test_progress_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(P, "PROGRESS_EVERY", 200)
    path = write_text(tmp_path / "blocks.txt", block_text(700))
    load_corpus(path, cache_dir=tmp_path / "cache", progress=True, min_count=1)
    err = capsys.readouterr().err
    assert "words read" in err and "cached in" in err
    load_corpus(path, cache_dir=tmp_path / "cache", progress=False, min_count=1)
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------------------------------------
# Errors: one clear CorpusError, and never a cache file
# ----------------------------------------------------------------------------------------------


def _expect_error(path: Path, cache: Path, match: str, **kw) -> CorpusError:
    with pytest.raises(CorpusError, match=match) as info:
        load(path, cache, **kw)
    assert isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)
    assert not [f for f in cache_files(cache) if not f.startswith("keep")]
    return info.value


def test_error_missing_path(tmp_path: Path) -> None:
    _expect_error(tmp_path / "nope.txt", tmp_path / "cache", "does not exist")


@pytest.mark.parametrize("name", ["empty.txt", "empty.txt.gz", "blank.txt.xz"])
def test_error_empty_file(tmp_path: Path, name: str) -> None:
    path = write_text(tmp_path / name, "" if name.startswith("empty") else "\n \n\t\n")
    _expect_error(path, tmp_path / "cache", "contains no words")


def test_error_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin2.txt"
    path.write_bytes(("zażółć gęślą jaźń\n" * 100).encode("iso-8859-2"))
    err = _expect_error(path, tmp_path / "cache", "is not UTF-8 text")
    assert str(path) in str(err)


def test_error_bad_compressed_file(tmp_path: Path) -> None:
    path = tmp_path / "fake.txt.xz"
    path.write_bytes(b"this is not xz data\n" * 10)
    _expect_error(path, tmp_path / "cache", "cannot read")


def test_error_bad_xml(tmp_path: Path) -> None:
    path = write_text(tmp_path / "broken.xml", "<mediawiki><page><text>a b</page>")
    _expect_error(path, tmp_path / "cache", "not a valid XML dump")


def test_error_corpus_too_small(tmp_path: Path) -> None:
    path = write_text(tmp_path / "small.txt", block_text(100))
    _expect_error(path, tmp_path / "cache", "too small.*valid 7", min_count=1, eos=None)
    path = write_text(tmp_path / "big.txt", block_text(700))
    _expect_error(path, tmp_path / "cache", "too small", min_count=1, max_words=100)


def test_error_vocabulary_only_unk(tmp_path: Path) -> None:
    path = write_text(tmp_path / "blocks.txt", block_text(700))
    _expect_error(path, tmp_path / "cache", "vocabulary would be only <UNK>", min_count=1000)


def test_error_folder_without_parts(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    write_text(folder / "train.txt", block_text(700))
    write_text(folder / "notes.txt", "x\n")
    _expect_error(folder, tmp_path / "cache", "has no valid/test file")
    write_text(folder / "valid.txt", block_text(100))
    write_text(folder / "test.txt", "")
    _expect_error(folder, tmp_path / "cache", "test.txt contains no words")
    write_text(folder / "ptb.test.txt", block_text(100))
    _expect_error(folder, tmp_path / "cache", "several test files")


def test_error_bad_settings(tmp_path: Path) -> None:
    path = write_text(tmp_path / "blocks.txt", block_text(700))
    _expect_error(path, tmp_path / "cache", "unknown tokenizer", tokenizer="spaces")
    _expect_error(path, tmp_path / "cache", "must be >= 1", min_count=0)
    _expect_error(path, tmp_path / "cache", "split", split=(6, 0.5))


# ----------------------------------------------------------------------------------------------
# Synthetic corpus with long-range dependencies
# ----------------------------------------------------------------------------------------------


def _entropy(counter: Counter) -> float:
    n = sum(counter.values())
    return -sum(c / n * math.log2(c / n) for c in counter.values())


def _cond_entropy(pairs: list[tuple[str, str]]) -> float:
    """H(Y | X) in bits from (x, y) pairs."""
    return _entropy(Counter(pairs)) - _entropy(Counter(x for x, _ in pairs))


def test_synthetic_corpus_shape_and_determinism() -> None:
    c = synthetic_corpus(20_000, seed=3)
    assert isinstance(c, Corpus) and c.vocab[0] == "<UNK>"
    assert (len(c.train), len(c.valid), len(c.test)) == (17_144, 1_428, 1_428)
    assert 200 <= c.vocab_size <= 500
    again = synthetic_corpus(20_000, seed=3)
    np.testing.assert_array_equal(again.train, c.train)
    assert again.vocab == c.vocab
    other = synthetic_corpus(20_000, seed=4)
    assert not np.array_equal(other.train, c.train)
    default = synthetic_corpus()
    assert 100_000 <= len(default.train) + len(default.valid) + len(default.test) <= 300_000
    assert default.vocab_size == 373


def test_synthetic_corpus_has_long_range_dependency() -> None:
    c = synthetic_corpus(60_000, seed=0)
    words = c.decode(c.train)
    topic_of = {w: w[5:] for w in words if w.startswith("topic")}
    pairs, distances, windows, filler_pairs = [], [], [], []
    last_topic, last_topic_pos = None, None
    for t, w in enumerate(words):
        if w.startswith("topic"):
            last_topic, last_topic_pos = topic_of[w], t
        elif last_topic is None:
            continue
        elif w.startswith("noun") and words[t - 1] == "the" and words[t - 2].startswith("w"):
            if t - last_topic_pos <= 9:  # the first noun of the sentence
                pairs.append((last_topic, w[4:].split("_")[0]))
                distances.append(t - last_topic_pos)
                windows.append(words[t - 4 : t])
        elif w.startswith("w"):
            filler_pairs.append((last_topic, w))
    assert len(pairs) > 2000
    # the topic word is always outside a 5-gram's 4-word window ...
    assert min(distances) >= 6 and max(distances) <= 9
    for window in windows:
        assert all(x == "the" or x.startswith("w") for x in window), window
    # ... yet it almost determines the noun's topic (H(noun topic) ~ log2 10 = 3.3 bits)
    h_noun = _entropy(Counter(y for _, y in pairs))
    h_noun_given_topic = _cond_entropy(pairs)
    assert h_noun > 3.0
    assert h_noun - h_noun_given_topic > 2.0
    assert np.mean([x == y for x, y in pairs]) > 0.85
    # the filler words in between carry (almost) no information on the topic
    h_fill = _entropy(Counter(y for _, y in filler_pairs))
    assert h_fill - _cond_entropy(filler_pairs) < 0.1


def test_synthetic_corpus_too_small() -> None:
    with pytest.raises(CorpusError, match="too small"):
        synthetic_corpus(100)


# ----------------------------------------------------------------------------------------------
# Downloads (file:// URLs and a refused loopback connection only)
# ----------------------------------------------------------------------------------------------


def test_download_ptb_via_file_url(tmp_path: Path) -> None:
    src = make_folder(
        tmp_path / "src", " a b c \n" * 20, " a b \n" * 10, " c a \n" * 10, "ptb.{}.txt"
    )
    urls = {f"ptb.{p}.txt": (src / f"ptb.{p}.txt").as_uri() for p in ("train", "valid", "test")}
    folder = C.download("ptb", tmp_path / "cache", urls=urls, progress=False)
    assert folder == tmp_path / "cache" / "downloads" / "ptb"
    assert (folder / "ptb.valid.txt").read_text() == " a b \n" * 10
    assert sorted(p.name for p in folder.iterdir()) == sorted(urls)
    c = load(folder, tmp_path / "cache", min_count=1, tokenizer="whitespace")
    assert len(c.train) == 80
    # second call: files present, nothing fetched (the URLs are gone)
    for p in src.iterdir():
        p.unlink()
    assert C.download("ptb", tmp_path / "cache", urls=urls, progress=False) == folder


def test_download_offline_gives_clear_error(tmp_path: Path) -> None:
    urls = {"plwiki-test.xml.bz2": "http://127.0.0.1:9/plwiki-test.xml.bz2"}
    with pytest.raises(CorpusError, match=r"could not download .*no network.*by hand") as info:
        C.download("plwiki", tmp_path / "cache", urls=urls, timeout=5, progress=False)
    assert "http://127.0.0.1:9/plwiki-test.xml.bz2" in str(info.value)
    assert cache_files(tmp_path / "cache") == []
    with pytest.raises(CorpusError, match="unknown corpus"):
        C.download("wikitext-103", tmp_path / "cache")


TEI = """<?xml version="1.0" encoding="UTF-8"?>
<TEI xmlns="http://www.tei-c.org/ns/1.0"><teiHeader><fileDesc><titleStmt>
<title>Nagłówek pliku</title></titleStmt></fileDesc></teiHeader>
<text><front><p>Strona tytułowa</p></front><body><div type="chapter">
<head>Rozdział pierwszy</head>
<p>Pierwszy   akapit z <emph>wyróżnieniem</emph>
 i łama\u00adniem.</p>
<quote>Cytat bez akapitu.</quote>
<quote><p>Akapit w cytacie.</p><p>Drugi w cytacie.</p></quote>
</div></body><back><p>Przypisy końcowe</p></back></text></TEI>
"""


def test_download_eltec_builds_text(tmp_path: Path) -> None:
    zip_path = tmp_path / "repo.zip"
    with zipfile.ZipFile(zip_path, "w") as z:
        z.writestr("ELTeC-pol-x/level1/POL0002.xml", TEI.replace("Pierwszy", "Drugi"))
        z.writestr("ELTeC-pol-x/level1/POL0001.xml", TEI)
        z.writestr("ELTeC-pol-x/level2/POL0001.xml", "<TEI/>")
    text = C.download(
        "eltec-pol", tmp_path / "cache", urls={"repo.zip": zip_path.as_uri()}, progress=False
    )
    lines = text.read_text(encoding="utf-8").splitlines()
    novel = [
        "Pierwszy akapit z wyróżnieniem i łamaniem.",
        "Cytat bez akapitu.",
        "Akapit w cytacie.",
        "Drugi w cytacie.",
    ]
    assert lines == [*novel, novel[0].replace("Pierwszy", "Drugi"), *novel[1:]]


def test_download_eltec_bad_zip(tmp_path: Path) -> None:
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"not a zip")
    with pytest.raises(CorpusError, match="cannot extract ELTeC-pol"):
        C.download("eltec-pol", tmp_path / "cache", urls={"bad.zip": bad.as_uri()}, progress=False)
    assert not (tmp_path / "cache" / "downloads" / "eltec-pol" / "eltec-pol.txt").exists()


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------


def test_cli_prepare_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = write_text(tmp_path / "blocks.txt", block_text(700))
    cache = str(tmp_path / "cache")
    args = ["prepare", str(path), "--min-count", "1", "--no-eos", "--cache-dir", cache, "--quiet"]
    assert C.main(args) == 0
    out = capsys.readouterr().out
    assert "vocab 13 (incl. <UNK>)" in out and "train 600 / valid 50 / test 50" in out
    assert C.main(["prepare", str(tmp_path / "missing.txt"), "--cache-dir", cache]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: corpus path") and err.count("\n") == 1
    assert C.main(["synthetic", "--n-words", "2000"]) == 0
    assert "train 1,716 / valid 142 / test 142" in capsys.readouterr().out


def test_cli_help(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as info:
        C.main(["prepare", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--min-count", "--max-words", "--tokenizer", "--no-lowercase", "--eos"):
        assert flag in out
    assert "--no-eos" in out and "--cache-dir" in out


def test_corpus_dataclass_api() -> None:
    c = synthetic_corpus(2_000, seed=1)
    assert c.unk_id == 0
    assert c.summary().startswith("synthetic(n_words=2000, seed=1): vocab")
    assert 0.0 <= c.unk_rate("valid") <= 1.0
    assert c.decode(c.encode(["topic1", "the", "nieznane"])) == ["topic1", "the", "<UNK>"]
