"""sim.bench: the benchmarks behind `esc-eval bench sim|score|decode|gpu|serve` and `esc-eval check`, one
room a benchmark family:

- loops/: `bench sim|score|decode`: our dialogue and scoring loops against the release's (the
  one-dialogue-at-a-time HF `generate` loop in loops/reference_loop.py, score.py's loop), and the
  scoring scale mode;
- gpu/: `bench gpu`: scoring and simulation through the pool against a minimal vLLM reference on
  the same engines, with vLLM's own token counts and the card's prefill bound;
- serve/: `bench serve`: ESC-Eval's workloads against any OpenAI-compatible endpoint;
- node/: `esc-eval check`: a new node's steps, each in its own process;
- dialogues.py: the dialogues a benchmark scores or replays (loops, gpu and serve share it);
- engine_probe.py: vLLM's own token counts (prefix-cache hits among them) from the engines a run
  used, in the pool's workers or in Serve replicas (gpu, loops and serve share it);
- commands.py: what `esc-eval check`, `bench gpu` and `bench serve` do once their options are parsed.

Layer: the top of sim: may import every sub-package of sim and serve; only the CLI imports it.
Inside: commands > node > gpu > loops | serve > dialogues | engine_probe."""

__all__: list[str] = []  # the benchmarks are called by module (commands.py for the CLI's check, bench gpu and serve)
