"""sim.cardbuild.sources: what card construction reads: the records that flow through it (items.py: a
source item, a dialogue turn, a rejection) and the readers of the Table 5 source datasets
(readers.py: one adapter per dataset family; a bad record becomes a rejection, never a crash)."""
from esc_eval.sim.cardbuild.sources.items import OFFICIAL_SOURCE_NAMES, Rejection, SourceItem, Turn, canonical_dataset
from esc_eval.sim.cardbuild.sources.readers import READERS, ReadResult, SourceFormatError, detect_dataset, read_source

__all__ = [
    "OFFICIAL_SOURCE_NAMES", "READERS", "ReadResult", "Rejection", "SourceFormatError", "SourceItem", "Turn",
    "canonical_dataset", "detect_dataset", "read_source",
]
