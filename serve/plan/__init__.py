"""serve.plan: where a run's models go and how long it takes. The plan's model (`model.py`:
placement config, engine plans, hardware), the planner (`planner.py`: `plan_run`), the in-process
and serve modes (`in_process.py`, `serve_mode.py`), model sizes and KV budgets (`sizes.py`),
packing models onto GPUs (`pack.py`), the projected run time from measured rates
(`projection.py`) and the plan as text (`text.py`).

Layer: the top of serve; imports every room below it."""
from esc_eval.serve.plan.model import EnginePlan, Hardware, PlacementConfig, Plan, PlanError
from esc_eval.serve.plan.planner import plan_run
from esc_eval.serve.plan.projection import Projection, Rates, RatesError, Workload, load_rates, project
from esc_eval.serve.plan.text import plan_lines

__all__ = ["EnginePlan", "Hardware", "PlacementConfig", "Plan", "PlanError", "Projection", "Rates", "RatesError",
           "Workload", "load_rates", "plan_lines", "plan_run", "project"]
