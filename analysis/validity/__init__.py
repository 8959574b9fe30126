"""analysis.validity: the validity bench of esc-eval's verdicts (`esc-eval bench validity`): every
check registered in analysis/checks run on planted runs over seeds and sizes (bench.py), the table
and its JSON (table.py), the one call the CLI makes (run.py); the sections and commands with no check, and why (declared.py).
Every check is declared next to its analysis (run.py's load_all_checks imports them all).

Layer: the top of analysis, beside bench/; it reads every analysis. The planted runs come from a
runner the CLI hands in (sim/bench/planted: analysis never imports sim's jobs)."""
from esc_eval.analysis.validity.bench import POWER, Runner, collect, size_row, summarize
from esc_eval.analysis.validity.run import SIZES, bench_validity_command, load_all_checks, run_validity
from esc_eval.analysis.validity.table import markdown, write_json

__all__ = ["POWER", "Runner", "SIZES", "bench_validity_command", "collect", "load_all_checks", "markdown", "run_validity", "size_row",
           "summarize", "write_json"]
