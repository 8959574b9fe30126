"""runs: the run folder, what every job writes and every reader reads: the row schemas (records.py:
dialogues, scores, pairwise verdicts, the seeker's own ratings),
the folder itself (runfolder.py: manifest, atomic Parquet parts, one row per key), where its files
live (storage.py: the interface and local disk; storage_objects.py: object stores; storage_server.py:
the writer on the driver's node; open.py picks one), turn checkpoints (checkpoints.py), the call
cache inside it (call_cache.py), usage and cost (usage.py), parse failures (parse_failures.py),
the official dialogue/score JSON (official.py), and dialogues cut after each round for scores by
round (by_round.py).

Layer: machinery above the domain (judging's dimensions, dialogue's transcript lines); imports
serve (the registry's prices): nothing of pool or jobs."""
from esc_eval.sim.runs.by_round import (BY_ROUND_RULES, ROUND_PREFIX, prefix_id, round_prefixes, split_prefix_id,
                                        write_round_prefixes)
from esc_eval.sim.runs.call_cache import RUN_FOLDER_CACHE, RunFolderCallCache
from esc_eval.sim.runs.checkpoints import TurnCheckpoints, clear_folder, compact_folder, has_logs, read_folder
from esc_eval.sim.runs.official import (KNOWN_LANGUAGES, OFFICIAL_UNPARSED, OfficialFormatError, export_run_official,
                                        official_file_name,
                                        official_keys, parse_official_name, read_official_dialogues, read_official_scores,
                                        write_official_dialogues, write_official_scores)
from esc_eval.sim.runs.open import OutputFolder, StorageSpec, open_storage
from esc_eval.sim.runs.parse_failures import parse_failure_report
from esc_eval.sim.runs.records import (DIALOGUE_SCHEMA, PAIRWISE_SCHEMA, REPLY_SAFETY_SCHEMA, SCORE_SCHEMA,
                                       SEEKER_RATING_ITEMS, SEEKER_RATING_SCHEMA, dialogue_id, dialogue_row, pairwise_row,
                                       reply_safety_row, score_row, seeker_rating_row, stable_id)
from esc_eval.sim.runs.runfolder import RunFolder, now_utc
from esc_eval.sim.runs.storage import (LocalStorage, RunFolderError, RunStorage, as_location, atomic_write_bytes, is_uri,
                                       join_location, local_path, location_name, redact_uri)
from esc_eval.sim.runs.storage_objects import ArrowStorage
from esc_eval.sim.runs.storage_server import ShippedStorage, StorageServer, start_server
from esc_eval.sim.runs.usage import compute_usage, record_usage, refresh_usage

__all__ = [
    "BY_ROUND_RULES", "ROUND_PREFIX", "prefix_id", "round_prefixes", "split_prefix_id", "write_round_prefixes",
    "ArrowStorage", "DIALOGUE_SCHEMA", "KNOWN_LANGUAGES", "LocalStorage", "OFFICIAL_UNPARSED", "OfficialFormatError",
    "OutputFolder", "RUN_FOLDER_CACHE", "RunFolder", "RunFolderCallCache", "RunFolderError", "RunStorage",
    "PAIRWISE_SCHEMA", "REPLY_SAFETY_SCHEMA", "SCORE_SCHEMA", "SEEKER_RATING_ITEMS", "SEEKER_RATING_SCHEMA", "reply_safety_row",
    "seeker_rating_row", "ShippedStorage", "StorageServer", "StorageSpec", "TurnCheckpoints", "as_location",
    "atomic_write_bytes", "clear_folder", "compact_folder", "compute_usage", "dialogue_id", "dialogue_row", "has_logs",
    "export_run_official", "is_uri", "join_location", "local_path", "location_name", "now_utc", "official_file_name", "official_keys",
    "open_storage", "parse_failure_report", "parse_official_name", "read_folder", "read_official_dialogues",
    "read_official_scores", "record_usage", "redact_uri", "refresh_usage", "pairwise_row", "score_row", "stable_id", "start_server",
    "write_official_dialogues", "write_official_scores",
]
