"""A scripted chat model for card-construction tests: answers each stage's prompt plausibly.

extraction -> a card built from the post/dialogue (items whose text holds "EMPTY-CARD" get a
reply with missing fields); filter -> a label by keyword, or discard for problems under 60 characters;
classify -> the first offered choice whose words appear in the problem, else choice 1;
risk -> a level by keyword in the source text (items holding "RISK-GIBBERISH" get an unreadable reply).
It counts calls per stage so tests can check what a resumed run skipped.
"""
from __future__ import annotations

import re
from collections import Counter

from esc_eval.serve.chat.interface import ChatModel, ChatModelError, ChatResult, GenerationParams


class ScriptedCardModel(ChatModel):
    name = "test/scripted-cards"

    def __init__(self, fail_stage: str | None = None, fail_times: int = 0):
        self.calls: Counter[str] = Counter()
        self.fail_stage = fail_stage
        self.fail_times = fail_times

    async def chat(self, messages, params: GenerationParams | None = None, *, adapter=None, session_id=None) -> ChatResult:
        prompt = messages[-1].content
        stage = ("extract" if ("extraction of a" in prompt or "角色卡的提取" in prompt) else
                 "filter" if ("identity judgment" in prompt or "身份判断" in prompt) else
                 "risk" if ("crisis risk" in prompt or "危机风险" in prompt) else "classify")
        self.calls[stage] += 1
        if stage == self.fail_stage and self.fail_times > 0:
            self.fail_times -= 1
            raise ChatModelError("scripted transient failure", kind="transient")
        zh = bool(re.search(r"[\u4e00-\u9fff]{6,}", prompt.split("\n", 1)[-1])) and ("以下是" in prompt or "角色卡输入" in prompt or "角色卡：" in prompt)
        if stage == "risk":
            text = prompt.split("\n", 7)[-1].lower()
            if "risk-gibberish" in text:
                return ChatResult(text="I cannot tell")
            level = (3 if re.search(r"hurt (him|her)|伤害他", text) else 2 if re.search(r"end my life|结束生命", text)
                     else 1 if re.search(r"not wake up|不醒", text) else 0)
            labels = params.choices if params and params.choices else (["none", "passive ideation", "active ideation with plan",
                                                                        "harm to others"])
            return ChatResult(text=labels[level])
        if stage == "extract":
            body = prompt.split("\n", 1)[1]
            if "EMPTY-CARD" in body:
                return ChatResult(text="Age: young\nProblem: unclear")
            seeker = re.findall(r"(?m)^(?:seeker: |求助者：)(.*)$", body)
            if seeker:  # a dialogue: the seeker's lines
                text = " ".join(seeker)
            else:  # a post: the quoted text
                m = re.search(r"[\"“](.*)[\"”]", body, re.S)
                text = m.group(1) if m else body
            text = re.sub(r"\s+", " ", text)[:160].strip()
            if zh:
                return ChatResult(text=f"年龄：25岁 性别：女 职业：未提及\n问题：{text}")
            return ChatResult(text=f"Age: in his 40s Gender: Male. Occupation: not mentioned\nProblem: {text}")
        if stage == "filter":
            problem = prompt.rsplit("Problem: ", 1)[-1] if "Problem: " in prompt else prompt.rsplit("问题：", 1)[-1]
            labels = params.choices if params and params.choices else None
            if len(problem.strip()) < 60:
                return ChatResult(text=labels[-1] if labels else "The character card is not detailed enough. Discard")
            if re.search(r"job|work|school|exam|thesis|考|工作|裁员|读研", problem):
                return ChatResult(text=labels[1] if labels else "work, study, career issues")
            if re.search(r"friend|roommate|室友|宿舍", problem):
                return ChatResult(text=labels[2] if labels else "social issues and others")
            return ChatResult(text=labels[0] if labels else "family issues")
        choices = params.choices if params and params.choices else []
        return ChatResult(text=choices[0] if choices else "1")
