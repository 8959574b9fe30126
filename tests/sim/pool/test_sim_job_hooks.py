"""The seams are declared (sim/pool/job.py Job, serve/chat/interface.py ChatModel and Backend): a job, a
chat model (every registered backend's, and every wrapper's) or a backend that defines a name its seam
does not declare fails here, whatever the name holds: a misspelt hook is never called, and a misspelt
attribute (`unti = "pair"`, `self.calls_per_itme = 3`) is never read, so both would pass silently.

The rule, for every esc_eval subclass of a seam:
- each public name at class level (a method, a property, a plain value) is one the seam declares (its
  public names and its annotations), or one of the class's own API named in OWN_API (a backend's own
  methods for callers that hold that backend itself: no wrapper forwards them);
- each public attribute a method sets on `self` that the seam does not declare is the class's own state,
  and may not be within a typo of a declared name (difflib's ratio 0.75, or the same letters without
  case and underscores) unless the class declares it as its own, annotated in its body.
A wrapper (WrapperChatModel) passes every hook ChatModel declares on to the model it wraps."""
import ast
import difflib
import importlib
import pkgutil
import inspect
import textwrap

from esc_eval.serve.chat.interface import BACKENDS, Backend, ChatModel, WrapperChatModel
from esc_eval.sim.pool.job import Job


def _every_module(*packages: str) -> list[str]:
    """Every module of these packages: a job or a chat model defined anywhere in them is checked, not
    only those a list names (a ChatModel subclass the scoring of provider batches defines for itself went
    unchecked while the lists named modules). Where jobs and chat models live: all of sim and train,
    serve's seam and its implementations; importing them takes about a second (none imports vLLM, Ray
    or torch at the top)."""
    out = []
    for name in packages:
        package = importlib.import_module(name)
        out += [m.name for m in pkgutil.walk_packages(package.__path__, name + ".")]
    return out


JOB_MODULES = CHAT_MODULES = _every_module("esc_eval.sim", "esc_eval.train", "esc_eval.serve.backends", "esc_eval.serve.batches",
                                            "esc_eval.serve.calls", "esc_eval.serve.chat")
OWN_API = {
    # the vLLM backend's engine and prompt rendering, for callers holding a VLLMChatModel (the benchmarks'
    # loops, the engine tests); a model reached through the pool's wrappers has only ChatModel's hooks
    "esc_eval.serve.backends.vllm_engine.VLLMChatModel": {"host", "render", "render_text", "label_token_ids"},
}
TYPO = 0.75


def _subclasses(base: type) -> set[type]:
    out, todo = set(), [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in out:
                out.add(sub)
                todo.append(sub)
    return out


def declared(base: type) -> set[str]:
    """What a seam declares: its public names and its annotated attributes (e.g. Job.kind: ClassVar[str])."""
    names = {n for n in dir(base) if not n.startswith("_")}
    for klass in base.__mro__:
        names |= {n for n in vars(klass).get("__annotations__", {}) if not n.startswith("_")}
    return names


def _self_attributes(cls: type) -> set[str]:
    """Public attributes the class's own methods set on `self` (x = ..., x += ..., x: T = ..., a, x = ...)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):  # defined where there is no source (a REPL): nothing to read
        return set()
    targets = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets += node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets.append(node.target)
    out = set()
    while targets:
        t = targets.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            targets += t.elts
        elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
            out.add(t.attr)
    return {n for n in out if not n.startswith("_")}


def _typo_of(name: str, names: set[str]) -> str | None:
    squash = name.replace("_", "").lower()
    same = [n for n in names if n.replace("_", "").lower() == squash]
    close = difflib.get_close_matches(name, sorted(names), n=1, cutoff=TYPO)
    return (same or close or [None])[0]


def own_state(cls: type, base: type) -> set[str]:
    """The attributes a class declares as its own in its body's annotations (`demand: Demand`), its bases'
    below the seam included: state that may be named near a hook without being a typo of it."""
    return {n for klass in cls.__mro__ if klass not in base.__mro__
            for n in vars(klass).get("__annotations__", {}) if not n.startswith("_")}


def undeclared(cls: type, base: type, own: set[str] = frozenset()) -> list[str]:
    """Why `cls` holds a name its seam `base` does not declare (none: it holds none)."""
    names = declared(base)
    problems = [f"{n} (class level: not a hook of {base.__name__})" for n in sorted(vars(cls))
                if not n.startswith("_") and n != "__annotations__" and n not in names | set(own)]
    for n in sorted(_self_attributes(cls) - names - set(own) - own_state(cls, base)):
        typo = _typo_of(n, names)
        if typo is not None:
            problems.append(f"self.{n} (a typo of {base.__name__}.{typo}?)")
    return problems


def _ours(base: type, modules: list[str]) -> set[type]:
    for name in modules:
        importlib.import_module(name)
    return {c for c in _subclasses(base) if c.__module__.startswith("esc_eval.")}


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_every_job_defines_only_the_hooks_job_declares():
    jobs = _ours(Job, JOB_MODULES)
    assert {c.__name__ for c in jobs} >= {"SimulationJob", "ScoringJob", "DistressJob", "PairwiseJob", "EngineProbe"}
    for cls in jobs:
        assert undeclared(cls, Job) == [], f"{_name(cls)}: not hooks of sim.pool.job.Job"


def test_every_chat_model_defines_only_the_hooks_chat_model_declares():
    models = _ours(ChatModel, [where.partition(":")[0] for where in BACKENDS.values()] + CHAT_MODULES)
    registered = {where.partition(":")[0] for where in BACKENDS.values()}
    assert registered <= {c.__module__ for c in models}, "a registered backend whose ChatModel is not checked here"
    assert {c.__name__ for c in models} >= {"VLLMChatModel", "FakeChatModel", "OpenAIChatModel", "RetryingChatModel",
                                            "CachedChatModel", "WrapperChatModel"}
    for cls in models:
        own = OWN_API.get(_name(cls), set())
        assert own <= set(vars(cls)), f"{_name(cls)}: OWN_API names what it does not define: {own - set(vars(cls))}"
        assert undeclared(cls, ChatModel, own) == [], f"{_name(cls)}: not hooks of serve.chat.interface.ChatModel"


def test_every_backend_defines_only_the_hooks_backend_declares():
    backends = _ours(Backend, [where.partition(":")[0] for where in BACKENDS.values()])
    assert len(backends) >= 5
    for cls in backends:
        assert undeclared(cls, Backend) == [], f"{_name(cls)}: not hooks of Backend"


def test_a_wrapper_passes_every_hook_chat_model_declares_on():
    """No hook is read through a wrapper by `__getattr__`: WrapperChatModel defines each one (name: set from
    the wrapped model's), so a hook added to ChatModel and not to the wrapper fails here."""
    hooks = declared(ChatModel) - {"name"}
    assert hooks >= {"chat", "close", "capabilities", "cache_identity", "default_params", "holds_engine", "released",
                     "start", "capacity", "release"}
    assert sorted(hooks - set(vars(WrapperChatModel))) == []
    assert not any(hasattr(klass, "__getattr__") for c in _ours(ChatModel, CHAT_MODULES) for klass in c.__mro__
                   if klass.__module__.startswith("esc_eval."))


def test_a_misspelt_hook_or_attribute_of_any_kind_is_caught():
    class Sloppy(Job):
        kind = "scores"
        unti = "pair"  # unit
        defualt_concurrency = 4  # default_concurrency

        def __init__(self):
            self.calls_per_itme = 3  # calls_per_item
            self.cfg = {}  # the job's own state: fine

        async def setup(self, models):
            pass

        async def run(self, item):
            return [], {}

        def after_flsh(self, items):  # after_flush: a hook nobody would call
            pass

    problems = undeclared(Sloppy, Job)
    assert [p.split(" ")[0] for p in problems] == ["after_flsh", "defualt_concurrency", "unti", "self.calls_per_itme"]
    assert "a typo of Job.calls_per_item" in problems[-1]

    class Careless(ChatModel):
        holds_engin = True  # holds_engine

        def __init__(self):
            self.default_param = None  # default_params
            self.DefaultParams = None  # default_params again, in another case

        async def chat(self, messages, params=None, *, adapter=None, session_id=None):
            raise NotImplementedError

    assert [p.split(" ")[0] for p in undeclared(Careless, ChatModel)] == ["holds_engin", "self.DefaultParams",
                                                                        "self.default_param"]
