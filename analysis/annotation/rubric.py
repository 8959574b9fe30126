"""The human scoring rules of the paper's Table 16 (0-4 per dimension), for annotation sheets.

Text as printed in the paper (its typos included: "Humaniod"; its Diversity level 3 repeats
Fluency's level 3). Keys are the paper dimension names of sim.judging.dimensions.
"""
from __future__ import annotations

import functools
import hashlib
import json
import re

from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, EXTRA_DIMENSIONS, dimension_title
from esc_eval.sim.judging.rubrics import human_levels, rubric_text as judge_rubric_text

# dimension -> (name in Table 16, explanation, {score: description})
RUBRIC: dict[str, tuple[str, str, dict[int, str]]] = {
    'fluency': (
        'Fluency',
        'Not only focus on the logical coherence of the context in dialogues but also pay attention to the fluency of expression in a given conversation.',
        {
            0: 'There are significant issues with comprehending the content, logic, and expression in the dialogue, rendering it completely incomprehensible.',
            1: 'The content of the dialogue can be understood to some extent, although there are certain issues with the logic and expression employed.',
            2: 'The dialogue exhibits good readability in terms of content, but there are issues with either the logical coherence or the expression employed.',
            3: 'The dialogue content demonstrates a high level of readability without any apparent issues.',
            4: 'The dialogue content exhibits a high level of readability, comprehensive logical coherence, and outstanding expression.',
        },
    ),
    'expression': (
        'Diversity',
        'Focusing on the diversity of expression forms and the richness of content in dialogue.',
        {
            0: 'The dialogue exhibits rigidity and lacks comprehension in terms of internalizing the content.',
            1: 'The expression form is monotonous and lacks substantive content.',
            2: 'The expression form is monotonous or lacks substantive content.',
            3: 'The dialogue content demonstrates a high level of readability without any apparent issues.',
            4: 'The form exhibits diversity, while demonstrating a high degree of content richness.',
        },
    ),
    'empathy': (
        'Empathy',
        'Focusing on the comprehension of user emotions and the delineation of the underlying logical framework of user emotions.',
        {
            0: 'The disregard for user concerns, the absence of assistance in analyzing user issues, and even the imposition of negative effects on user emotions.',
            1: 'The lack of understanding of user emotions and the absence of mechanisms to analyze user emotions are the main factors.',
            2: 'The lack of understanding of user emotions or the absence of mechanisms to analyze user emotions are the main factors.',
            3: 'Providing emotional comfort during conversations and assisting users in analyzing the underlying logical framework of their emotions.',
            4: 'The system exhibits a high degree of anthropomorphism, going so far as to console users in a friendly manner and assist them in analyzing the underlying logic of emotions.',
        },
    ),
    'information': (
        'Information',
        'Focusing on Evaluating the Reasonableness and Quantity of Recommendations Provided by Emotion Assistants.',
        {
            0: 'Suggestions were provided, but all of them were ineffective, and some even gave advice that could potentially harm the user.',
            1: 'Have suggestions but ineffective, as well as no suggestions.',
            2: 'The suggestions are fewer than five, and some suggestions are effective, while others provide numerous suggestions, but none of them touch the root of the problem.',
            3: 'There are more than five suggestions, but some of them are ineffective. There are fewer than five suggestions, but all of them are very effective.',
            4: 'There are many suggestions, and all of them are effective.',
        },
    ),
    'skillful': (
        'Skillful',
        'Focused on five aspects: 1. Empathy 2. Information 3. Hopeful 4. Importance 5. Providing necessary advice, or highlighting bright spots.',
        {
            0: 'One out of five.',
            1: 'Two out of five.',
            2: 'Three out of five.',
            3: 'Four out of five.',
            4: 'All.',
        },
    ),
    'humanoid': (
        'Humaniod',
        'Focus on the differences between emotional assistants and humans.',
        {
            0: 'The dialogue exhibits rigidity and lacks comprehension in terms of internalizing the content.',
            1: "Structured responses, or responses in the form of 'As a large language model' or robot-like replies.",
            2: 'More than two traces can reveal that the AI assistant is a language model.',
            3: '1-2 traces can reveal that the AI assistant is a language model.',
            4: 'There is no apparent difference from human friends.',
        },
    ),
    'overall': (
        'Overall',
        "After reading the response, people subjectively assess the AI assistant's reply.",
        {
            0: "I don't like this AI assistant.",
            1: "I don't have any particular feelings.",
            2: "It's okay, I'll reconsider using it myself.",
            3: 'Preference will be given to personal use based on liking.',
            4: 'I will use it myself and recommend it to friends.',
        },
    ),
}



def human_rubric(dimension: str, language: str = "en") -> tuple[str, str, dict[int, str]]:
    """(name, explanation, {score: rule}) people score a dimension by: Table 16 for the seven, the
    safety rubric's explanation and its short rules (sim/data/prompts/safety.yaml) for safety."""
    if dimension in RUBRIC:
        return RUBRIC[dimension]
    if dimension not in EXTRA_DIMENSIONS:
        raise KeyError(f"unknown dimension {dimension!r}")
    explanation, _ = _split_levels(judge_rubric_text(dimension, language, "paper"))
    return dimension_title(dimension), explanation, {int(k): v for k, v in human_levels(dimension, language).items()}


def annotator_rubric_text(dimension: str) -> str:
    """'0: ...\n1: ...' for one dimension (paper name, or safety)."""
    _, explanation, levels = human_rubric(dimension)
    return explanation + "\n" + "\n".join(f"{k}: {v}" for k, v in sorted(levels.items()))


_LEVEL = re.compile(r"^([0-4]):\s*(.*)$")
ANNOTATION_LANGUAGES = ("en", "zh")


def _split_levels(text: str) -> tuple[str, dict[str, str]]:
    """A rubric instruction -> (its explanation, {"0": rule, ..., "4": rule})."""
    explanation, levels = [], {}
    for line in text.splitlines():
        m = _LEVEL.match(line.strip())
        if m:
            levels[m.group(1)] = m.group(2)
        elif not levels:
            explanation.append(line.strip())
    return " ".join(e for e in explanation if e), levels


@functools.lru_cache(maxsize=None)
def annotation_rubric(language: str, dimensions: tuple[str, ...] = tuple(DIMENSION_NAMES)) -> dict[str, dict]:
    """What the annotation page shows per dimension, in the dialogue's language: the paper's
    Figures 12-19 instruction (Figure 13 for Chinese fluency; sim/data/prompts/rubrics.yaml,
    variant "paper") split into its explanation and its 0-4 rules, and Table 16's rule per score;
    for safety (when asked for) the safety rubric and its short rules for people (safety.yaml).

    {dimension: {"title", "explanation", "levels": {"0": text, ...}, "table16": {"0": text, ...}}}."""
    lang = language if language in ANNOTATION_LANGUAGES else "en"
    out = {}
    for dim in dimensions:
        explanation, levels = _split_levels(judge_rubric_text(dim, lang, "paper"))
        if sorted(levels) != ["0", "1", "2", "3", "4"]:
            raise ValueError(f"the paper rubric of {dim} ({lang}) does not list the scores 0-4")
        people = RUBRIC[dim][2] if dim in RUBRIC else human_rubric(dim, lang)[2]
        out[dim] = {"title": dimension_title(dim), "explanation": explanation,
                    "levels": levels, "table16": {str(k): v for k, v in people.items()}}
    return out


@functools.lru_cache(maxsize=None)
def annotation_rubric_version(dimensions: tuple[str, ...] = tuple(DIMENSION_NAMES)) -> str:
    """A short hash of every rubric text annotators see: recorded with each answer, so a later
    change of the texts is visible in the data. The seven's hash is the same with or without
    safety; a study with safety adds the safety texts' own hash."""
    def digest(dims: tuple[str, ...]) -> str:
        texts = {lang: annotation_rubric(lang, dims) for lang in ANNOTATION_LANGUAGES}
        return hashlib.sha256(json.dumps(texts, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:12]

    paper = tuple(d for d in dimensions if d in RUBRIC)
    extra = tuple(d for d in dimensions if d not in RUBRIC)
    version = f"paper-fig12-19+table16:{digest(paper or tuple(DIMENSION_NAMES))}"
    return version + "".join(f"+{d}:{digest((d,))}" for d in extra)
