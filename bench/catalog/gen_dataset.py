#!/usr/bin/env python3
"""Writes a synthetic catalog source folder of N entities (default 20 000)
for the catalog benchmark: every type, relationships both ways, scores, and
a hidden source, in the same format as catalog/. Names are made of
invented words; descriptions mix domain words with invented words drawn with
a Zipf distribution, so that searches hit realistic numbers of entities.

usage: gen_dataset.py OUT_DIR [--entities N] [--seed S]
"""
import argparse
import json
import os
import random

# Domain words, frequent in every description, as in a real catalog.
DOMAIN = ("reasoning language model benchmark evaluation code math science agent tool retrieval vision audio "
          "multilingual safety alignment instruction chat dialogue summarization translation question answer "
          "knowledge planning search memory context sparse dense mixture expert distilled open weights frontier "
          "small large efficient robust adversarial synthetic human judged verified leaderboard harness suite "
          "dataset paper transformer attention scaling reinforcement learning preference reward program "
          "repository issue patch test latency throughput accuracy calibration factuality").split()
SYLLABLES = ("ka lo mi ra ten vor zu qui bel dan fi gor hal jin kel lum nor pex ris sol tar ul vek wim yor zen "
             "bra cle dru fen gla hur isk jor kru lin mar nev oth pra quo rud sev tov urm vas wex").split()
# Shares of each type, summing to 1.
SHARES = {"organizations": 0.02, "people": 0.15, "models": 0.30, "evals": 0.10, "tools": 0.075,
          "leaderboards": 0.015, "capabilities": 0.005, "papers": 0.335}


class Words:
    """A vocabulary of invented words used with a Zipf distribution, like words in real text, plus the
    domain words; names are drawn uniformly from the invented words, so that they are distinctive."""

    def __init__(self, rng, size=6000):
        words = set()
        while len(words) < size:
            words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))))
        self.vocabulary = sorted(words)
        rng.shuffle(self.vocabulary)
        self.weights = [1.0 / (rank + 1) for rank in range(size)]
        self.rng = rng

    def text(self, n):
        words = self.rng.choices(self.vocabulary, self.weights, k=n)
        words = [self.rng.choice(DOMAIN) if self.rng.random() < 0.3 else w for w in words]
        return " ".join(words).capitalize() + "."

    def name(self):
        return self.rng.choice(self.vocabulary)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--entities", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    words = Words(rng)
    counts = {t: max(2, int(args.entities * share)) for t, share in SHARES.items()}
    counts["papers"] += args.entities - sum(counts.values())
    slugs = {t: ["%s-%s-%d" % (words.name(), words.name(), i) for i in range(n)] for t, n in counts.items()}

    def title(slug):
        return " ".join(w.capitalize() for w in slug.split("-"))

    def base(t, slug):
        return {"slug": slug, "title": title(slug), "summary": words.text(12), "description": words.text(60)}

    def some(t, k):
        return sorted(set(rng.choice(slugs[t]) for _ in range(k)))

    out = {"sources": [{"id": "bench", "title": "Synthetic benchmark data", "hidden": False},
                       {"id": "bench-hidden", "title": "Hidden synthetic data", "hidden": True}],
           "licences": [{"id": "cc-by-4.0", "title": "CC BY 4.0", "redistributable": True},
                        {"id": "unrecorded", "title": "not recorded", "redistributable": False}]}
    out["organizations"] = [dict(base("organizations", s), kind=rng.choice(["company", "lab", "university"]))
                            for s in slugs["organizations"]]
    out["people"] = [dict(base("people", s), organizations=some("organizations", 2)) for s in slugs["people"]]
    out["capabilities"] = [base("capabilities", s) for s in slugs["capabilities"]]
    out["papers"] = [dict(base("papers", s), year=rng.randint(2018, 2026), authors=["Author %d" % rng.randint(1, 999)],
                          people=some("people", 3), organizations=some("organizations", 1), licence="unrecorded")
                     for s in slugs["papers"]]
    out["evals"] = [dict(base("evals", s), metric="accuracy (%)", papers=some("papers", 1),
                         capabilities=some("capabilities", 2), organization=rng.choice(slugs["organizations"]))
                    for s in slugs["evals"]]
    out["models"] = [dict(base("models", s), organization=rng.choice(slugs["organizations"]),
                          released="20%02d-%02d" % (rng.randint(19, 26), rng.randint(1, 12)),
                          open_weights=rng.random() < 0.5, papers=some("papers", 1)) for s in slugs["models"]]
    out["tools"] = [dict(base("tools", s), kind=rng.choice(["harness", "library", "framework"]),
                         organization=rng.choice(slugs["organizations"]), evals=some("evals", 4))
                    for s in slugs["tools"]]
    out["leaderboards"] = [dict(base("leaderboards", s), organization=rng.choice(slugs["organizations"]),
                                evals=some("evals", 5)) for s in slugs["leaderboards"]]
    for entity in out["models"][: max(1, len(out["models"]) // 100)]:
        entity["source"] = "bench-hidden"
    out["scores"] = [{"model": m, "eval": e, "value": round(rng.uniform(5, 95), 1), "setting": "0-shot",
                      "source_url": "https://bench.example/%d" % i}
                     for i, (m, e) in enumerate(sorted({(rng.choice(slugs["models"]), rng.choice(slugs["evals"]))
                                                        for _ in range(counts["models"] * 5)}))]
    os.makedirs(args.out, exist_ok=True)
    for section, items in out.items():
        with open(os.path.join(args.out, section + ".json"), "w", encoding="utf-8") as f:
            json.dump({section: items}, f)
    print("%d entities, %d scores in %s" % (sum(len(out[t]) for t in SHARES), len(out["scores"]), args.out))


if __name__ == "__main__":
    main()
