"""serve.calls: the policy every model call runs under, whatever its backend. One retry policy
(`retry.py`: attempts, backoff, Retry-After, per-call timeouts from `deadlines.py`), limits and
spend (`limits.py`: concurrency gates, rate and token limits, the spend cap), and the call cache
(`cache.py`: identical API calls answered from a content-addressed store).

Layer: above chat and config; imports no other room of serve."""
from esc_eval.serve.calls.cache import CachedChatModel, cache_key, cacheable
from esc_eval.serve.calls.deadlines import call_timeout
from esc_eval.serve.calls.limits import (BudgetExceededError, CallGate, Governor, ModelLimiter, ModelLimits, Price,
                                         SpendLedger)
from esc_eval.serve.calls.retry import RetryingChatModel, RetryPolicy, should_retry

__all__ = ["BudgetExceededError", "CachedChatModel", "CallGate", "Governor", "ModelLimiter", "ModelLimits", "Price",
           "RetryPolicy", "RetryingChatModel", "SpendLedger", "cache_key", "cacheable", "call_timeout", "should_retry"]
