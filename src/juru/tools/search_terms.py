"""From a question in English or Indonesian to the words a full-text search should look for."""

from __future__ import annotations

import re

MAX_TERMS = 32
# Words that say nothing about a topic; without them PostgreSQL's ts_rank (which has no inverse
# document frequency) would reward chunks for "the" and "yang".
_ENGLISH = """a about above after again all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for from
further had has have having he her here hers him his how i if in into is it its itself just me
more most my no nor not now of off on once only or other our ours out over own same she should
so some such than that the their theirs them then there these they this those through to too
under until up very was we were what when where which while who whom why will with would you
your yours please tell explain"""
_INDONESIAN = """ada adalah agar akan aku anda apa apakah atau bagaimana bagi bahwa banyak
belum berapa bila bisa boleh dalam dan dapat dari dengan di dia harus hingga ini itu jika juga
kami kamu kapan karena ke kenapa kita mana masih mengapa mereka nya oleh pada para saat saja
saya sebuah sedang sejak seperti siapa sudah supaya tentang tersebut tidak untuk yang tolong
jelaskan bagaimanakah"""
STOPWORDS = frozenset(_ENGLISH.split()) | frozenset(_INDONESIAN.split())
_WORD_RE = re.compile(r"[^\W_]+")


def _stem(word: str) -> str:
    """Fold an English plural so the prefix search finds the singular too ("refunds")."""
    if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def search_terms(query: str) -> list[str]:
    """Distinct lower-case words of the query, stop words and single letters left out, plurals
    folded; letters and digits only, so they are safe inside a full-text query."""
    terms: list[str] = []
    for word in _WORD_RE.findall(query.lower()):
        if len(word) < 2 or word in STOPWORDS:
            continue
        term = _stem(word)
        if term not in terms:
            terms.append(term)
    return terms[:MAX_TERMS]
