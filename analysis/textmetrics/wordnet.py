"""English WordNet for METEOR, offline, from the Debian package `wordnet-base`.

Can nltk read Debian's WordNet files offline? Not as shipped, for two reasons, both handled here:
1. nltk >= 3.9's path sandbox (nltk.pathsec) refuses a corpus root outside nltk.data.path, and
   refuses files that resolve (e.g. through a symlink) outside the root: /usr/share/wordnet
   cannot be used in place, nor linked to.
2. Debian's wordnet-base (WordNet 3.0 database: data.*, index.*, *.exc) does not ship the
   `lexnames` file that nltk's WordNetCorpusReader opens when it starts, nor `index.sense`, which
   nltk 3.10's reader reads at start to map a non-default WordNet onto the nltk_data "wordnet"
   corpus (for the multilingual OMW data) — and then looks that corpus up in nltk_data.
So we copy the database files once into a cache folder, write `lexnames` there (the fixed
WordNet 3.0 table, the same as the lexnames(5WN) man page of that package), add the folder to
nltk.data.path and open it with a WordNetCorpusReader whose version mapping is switched off (it
is WordNet 3.0 already; English only). No nltk_data download, no network.
"""
from __future__ import annotations

import functools
import os
import shutil
import warnings
from pathlib import Path

DEBIAN_WORDNET = Path("/usr/share/wordnet")
WORDNET_FILES = [f"{kind}.{pos}" for kind in ("data", "index") for pos in ("noun", "verb", "adj", "adv")] + [
    f"{pos}.exc" for pos in ("noun", "verb", "adj", "adv")
]
# WordNet 3.0 lexicographer files, numbered 00..44 (lexnames(5WN)); category 1 noun 2 verb 3 adj 4 adv.
LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
    "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location "
    "noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process "
    "noun.quantity noun.relation noun.shape noun.state noun.substance noun.time verb.body verb.change "
    "verb.cognition verb.communication verb.competition verb.consumption verb.contact verb.creation "
    "verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
INSTALL_HINT = "install the Debian package wordnet-base (apt-get install wordnet-base) for METEOR's synonym matching"


class WordNetUnavailable(RuntimeError):
    pass


def lexnames_text() -> str:
    return "".join(f"{i:02d}\t{name}\t{_CATEGORY[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES))


def default_cache_dir() -> Path:
    base = os.environ.get("ESC_EVAL_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "esc-eval")
    return Path(base) / "wordnet-3.0"


def prepare_wordnet_dir(source: Path = DEBIAN_WORDNET, cache_dir: Path | None = None) -> Path:
    """Copy the WordNet database into a reader folder with `lexnames` (once; returns the folder)."""
    target = Path(cache_dir) if cache_dir else default_cache_dir()
    missing = [f for f in WORDNET_FILES if not (source / f).is_file()]
    if missing:
        raise WordNetUnavailable(f"WordNet files {missing} not found in {source}: {INSTALL_HINT}")
    done = target / ".complete"
    if not done.exists():
        target.mkdir(parents=True, exist_ok=True)
        for f in WORDNET_FILES:
            shutil.copyfile(source / f, target / f)
        (target / "lexnames").write_text(lexnames_text(), encoding="ascii")
        done.write_text(str(source), encoding="utf-8")  # written last: a half-copied folder is redone
    return target


@functools.lru_cache(maxsize=4)
def wordnet_reader(source: str = str(DEBIAN_WORDNET), cache_dir: str | None = None):
    """An nltk WordNetCorpusReader over Debian's WordNet 3.0 (cached per process)."""
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    root = prepare_wordnet_dir(Path(source), Path(cache_dir) if cache_dir else None)
    if str(root) not in nltk.data.path:
        nltk.data.path.append(str(root))  # the nltk path sandbox only reads under these roots
    class _EnglishWordNet30(WordNetCorpusReader):
        def map_wn(self, version="wordnet"):
            # nltk maps a non-default WordNet onto its own "wordnet" corpus (through index.sense,
            # not in wordnet-base) for multilingual OMW lookups. This database IS WordNet 3.0
            # and we use English only, so there is nothing to map.
            return None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions are not available": we need English only
        return _EnglishWordNet30(str(root), None)
