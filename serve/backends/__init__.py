"""serve.backends: the implementations of the chat-model seam, each picked by its spec's prefix
(serve.chat `BACKENDS`): vllm/ (an in-process vLLM engine, `vllm_engine.py`, hosted per process by
`engine_host.py`), serve/ (a Ray Serve deployment handle, `serve_handle.py`), openai/ (any
OpenAI-compatible server over HTTP, `openai_http.py`), litellm/ (other providers' APIs,
`litellm_api.py`) and fake/ (a scripted model, a real registered backend for tests, `fake.py`).
Each imports its heavy dependency (vllm, ray, litellm) inside the implementation.

Layer: above engines, registry, calls and chat; imports neither the Serve app nor the planner.
Nothing is imported here: `get_chat_model` loads a backend by name on first use."""
__all__: list[str] = []
