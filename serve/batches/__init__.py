"""serve.batches: the providers' batch APIs (OpenAI's Batch API through LiteLLM, Anthropic's Message
Batches over its REST API) behind one interface (`transport.py`: BatchTransport, picked for a judge's
spec by `providers.py` batch_transport), and how batched calls are configured and priced (`config.py`).
sim/batching drives them for `score --batch`.

Layer: the top of serve beside the planner: it builds each request's body as the backends do
(serve.backends) and retries its control calls with the one policy's waits (serve.calls)."""
from esc_eval.serve.batches.config import BATCH_PRICE_FACTOR, BatchConfig, batch_price
from esc_eval.serve.batches.providers import batch_transport
from esc_eval.serve.batches.transport import BatchLimits, BatchTransport, BatchView, LineOutcome, line_error

__all__ = ["BATCH_PRICE_FACTOR", "BatchConfig", "BatchLimits", "BatchTransport", "BatchView", "LineOutcome",
           "batch_price", "batch_transport", "line_error"]
