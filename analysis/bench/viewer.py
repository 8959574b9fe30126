"""How fast the viewer opens a big run folder and how much memory it holds (`esc-eval bench view`).

The measurement runs in a fresh subprocess so its peak RSS is the viewer's alone."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from esc_eval.analysis.web.viewer import ResultsViewer
t_import = time.perf_counter() - t0

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")

rss0 = rss_mb()
t0 = time.perf_counter()
v = ResultsViewer(sys.argv[1:])
t_index = time.perf_counter() - t0
page = v.query(limit=50)
t_first = time.perf_counter() - t0
rss_open = rss_mb()
t1 = time.perf_counter()
v.query(model=v.meta()["models"][0], score_min=2.5, sort="average", descending=True, offset=100)
t_filter = time.perf_counter() - t1
row = page["rows"][0]
t1 = time.perf_counter()
d = v.dialogue(row["run"], row["dialogue_id"])
t_detail = time.perf_counter() - t1
word = d["turns"][1]["text"].split()[0]
t1 = time.perf_counter()
hits = v.query(q="zzz-no-such-text")["total"]
t_search = time.perf_counter() - t1
rss_search = rss_mb()
print(json.dumps({
    "n_dialogues": page["total"], "import_s": round(t_import, 3), "index_s": round(t_index, 3),
    "first_page_s": round(t_first, 3), "filter_sort_page_s": round(t_filter, 4), "open_dialogue_s": round(t_detail, 4),
    "full_text_search_s": round(t_search, 3), "rss_before_mb": round(rss0, 1), "rss_after_open_mb": round(rss_open, 1),
    "rss_after_search_mb": round(rss_search, 1),
    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""


def bench_viewer(run_dirs: list[Path]) -> dict[str, Any]:
    """Open the runs in a fresh interpreter: index time, time to the first page, RSS, search time."""
    proc = subprocess.run([sys.executable, "-c", _CHILD, *map(str, run_dirs)], capture_output=True, text=True,
                          check=False, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"viewer bench failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["parts"] = sum(len(list((Path(p) / "dialogues").glob("part-*.parquet"))) for p in run_dirs)
    out["bytes_on_disk"] = sum(f.stat().st_size for p in run_dirs for f in Path(p).rglob("*.parquet"))
    return out
