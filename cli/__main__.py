"""`python -m esc_eval.cli` = `esc-eval` (vLLM spawns processes: the guard matters)."""
from esc_eval.cli.app import main

if __name__ == "__main__":
    main()
