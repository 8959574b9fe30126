"""ray.serve.llm's LLMServer, whose replica names its engine's own cause when the engine does not start.

A replica starts its vLLM engine in its constructor; when the engine fails, vLLM raises "Engine core
initialization failed. See root cause above" and the cause is only in the replica's log files.
This server tees what the engine's processes print while it starts (serve/engines/output.py) and
raises EngineStartError with the cause found there: Serve's DEPLOY_FAILED message ends with that
line, which serve/app/deploy.py shows. Same class name as Ray's, so deployment names stay
"LLMServer:<model>"; serve/app/lora.py's LocalLoraLLMServer builds on it.
"""
from __future__ import annotations

from esc_eval.serve.chat.interface import EngineStartError
from esc_eval.serve.engines.output import ChildOutput, cause_of


def _base():
    from ray.serve.llm import LLMServer as RayLLMServer

    return RayLLMServer


class LLMServer(_base()):  # type: ignore[misc]
    """ray.serve.llm.LLMServer; a failed engine start raises EngineStartError naming its cause."""

    async def start(self):
        output = ChildOutput()
        try:
            with output.capture():  # the engine's processes inherit the teed stdout/stderr
                await super().start()
        except Exception as e:
            model = self._llm_config.model_id
            raise EngineStartError(f"the vLLM engine for {model} did not start: {cause_of(e, output)}",
                                   model=model, detail=output.tail()) from e
