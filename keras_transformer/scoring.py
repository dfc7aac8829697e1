"""`corpus_scores`: sacreBLEU's corpus BLEU and chrF of translations, with the signatures that make them comparable.

Every score the package reports (`keras-transformer evaluate` and `tune`, `search_decoding`) comes from here, under
the same keys.
"""

SCORE_KEYS = ("bleu", "bleu_lowercased", "chrf")


def corpus_scores(hypotheses, references):
    """Corpus scores of `hypotheses` against one reference each, by sacreBLEU's defaults.

    Args:
        hypotheses: the translations (a list of strings).
        references: their reference translations (a list of strings, as long as `hypotheses`).

    Returns:
        A dict: `bleu` (cased, detokenized, the 13a tokenizer), `bleu_lowercased` (the same on lowercased text)
        and `chrf` (floats, 0 to 100, not rounded); `bleu_detail` (sacreBLEU's line for `bleu`: the n-gram
        precisions, brevity penalty and lengths); `signatures` (sacreBLEU's signature of each score, by key).

    Example:

    >>> scores = corpus_scores(["a dog runs ."], ["A dog runs ."])
    >>> round(scores["bleu_lowercased"], 1), scores["signatures"]["bleu_lowercased"].startswith("nrefs:1|case:lc|")
    (100.0, True)
    """
    import sacrebleu

    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(f"corpus_scores: {len(hypotheses)} hypotheses but {len(references)} references")
    metrics = {"bleu": sacrebleu.metrics.BLEU(), "bleu_lowercased": sacrebleu.metrics.BLEU(lowercase=True),
               "chrf": sacrebleu.metrics.CHRF()}
    results = {key: metric.corpus_score(hypotheses, [references]) for key, metric in metrics.items()}
    scores = {key: float(results[key].score) for key in SCORE_KEYS}
    scores["bleu_detail"] = str(results["bleu"])
    scores["signatures"] = {key: str(metric.get_signature()) for key, metric in metrics.items()}
    return scores
