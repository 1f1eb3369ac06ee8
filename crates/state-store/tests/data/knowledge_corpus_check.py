"""Reference BM25 ranker for knowledge_corpus.json: checks that each query's label is the top hit.

Mirrors the Rust recall path (state-text analyzer + state-core knowledge index): words are runs of
letters/digits, lowercased, English stop words dropped, Snowball English stems; a note is indexed as
its content (x1) + keywords (x3 boost) + id words (x2); Okapi BM25 with k1=1.2, b=0.75 and
idf = ln(1 + (N - df + 0.5) / (df + 0.5)); repeated query terms count once. A query with a scope
only considers notes with that scope or with none. Prints misses and top-1 / top-3 accuracy.

Run:  pip install snowballstemmer && python3 knowledge_corpus_check.py [path/to/knowledge_corpus.json] [-v]
"""

import json
import math
import os
import re
import sys
from collections import Counter

import snowballstemmer

STOP_WORDS = set("""
a about above after again against all am an and any are as at be because been before being below between
both but by can could did do does doing down during each few for from further had has have having he her
here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
now of off on once only or other our ours ourselves out over own same she should so some such than that the
their theirs them themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves
""".split())
STEM = snowballstemmer.stemmer("english")
K1, B = 1.2, 0.75
KEYWORD_WEIGHT, ID_WEIGHT = 3, 2


def terms(text):
    words = [w for w in re.findall(r"[^\W_]+", text.lower()) if len(w) <= 40 and w not in STOP_WORDS]
    return STEM.stemWords(words)


def document(note):
    doc = Counter(terms(note["content"]))
    for field, weight in ((" ".join(note.get("keywords", [])), KEYWORD_WEIGHT), (note["id"], ID_WEIGHT)):
        for t in terms(field):
            doc[t] += weight
    return doc


def rank(notes, docs, query, scope=None):
    n = len(docs)
    avg = max(sum(sum(d.values()) for d in docs) / n, 1.0)
    scores = Counter()
    for t in set(terms(query)):
        df = sum(1 for d in docs if t in d)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for note, d in zip(notes, docs):
            if t in d:
                norm = 1 - B + B * sum(d.values()) / avg
                scores[note["id"]] += idf * d[t] * (K1 + 1) / (d[t] + K1 * norm)
    by_id = {note["id"]: note for note in notes}
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    return [(i, s) for i, s in ranked if scope is None or by_id[i].get("scope") in (None, scope)]


def main():
    args = [a for a in sys.argv[1:] if a != "-v"]
    path = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "knowledge_corpus.json")
    corpus = json.load(open(path, encoding="utf-8"))
    notes, queries = corpus["notes"], corpus["queries"]
    docs = [document(note) for note in notes]
    top1 = top3 = 0
    for q in queries:
        ranked = rank(notes, docs, q["query"], q.get("scope"))
        ids = [i for i, _ in ranked]
        pos = ids.index(q["expected"]) + 1 if q["expected"] in ids else None
        top1 += pos == 1
        top3 += pos is not None and pos <= 3
        if pos != 1 or "-v" in sys.argv:
            shown = ", ".join(f"{i} {s:.2f}" for i, s in ranked[:3])
            print(f"[{'ok' if pos == 1 else 'MISS'} rank={pos}] {q['query']!r} -> want {q['expected']}; top: {shown}")
    total = len(queries)
    print(f"notes={len(notes)} queries={total} scoped_notes={sum('scope' in n for n in notes)}")
    print(f"top-1 {top1}/{total} = {top1 / total:.3f}   top-3 {top3}/{total} = {top3 / total:.3f}")


if __name__ == "__main__":
    main()
