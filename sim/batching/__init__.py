"""sim.batching: `score --batch`, a scoring whose judge calls go to the providers' batch APIs
(serve/batches) at half the price. The run folder keeps the batches (book.py), so a scoring killed
and started again follows the batches in flight instead of sending them twice; the scoring job's own
code turns their answers into score rows (answers.py, replay.py), once each; what a pass still needs
goes out packed within the providers' limits (packing.py); flight.py sends, follows and collects;
progress.py shows batches and requests; runner.py is the loop and the online fallback.

Layer: above the jobs (it runs the scoring job's code on the batches' answers), below launch."""
from esc_eval.sim.batching.answers import AnswerIndex, NotAnsweredYet, ReplayJudge
from esc_eval.sim.batching.book import BatchBook, RequestRef
from esc_eval.sim.batching.flight import BatchFlight
from esc_eval.sim.batching.packing import PlannedBatch, limits_for, pack
from esc_eval.sim.batching.progress import BatchProgress, batch_progress
from esc_eval.sim.batching.replay import ReplayPass
from esc_eval.sim.batching.runner import batch_transports, run_batch_scoring

__all__ = ["AnswerIndex", "BatchBook", "BatchFlight", "BatchProgress", "NotAnsweredYet", "PlannedBatch", "ReplayJudge",
           "ReplayPass", "RequestRef", "batch_progress", "batch_transports", "limits_for", "pack", "run_batch_scoring"]
