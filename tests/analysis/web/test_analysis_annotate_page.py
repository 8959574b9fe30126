"""The annotating page in a real headless Chromium (Playwright driving Debian's /usr/bin/chromium):
two annotators score their dialogues with the keyboard only, at the same time; the organiser's
agreement panel shows the figures the analysis functions give on the stored table."""
from __future__ import annotations

import shutil

import pytest

from annotate_testdata import fake_run, score_for, serving, study_request
from esc_eval.analysis.annotation.agreement import agreement_summary
from esc_eval.analysis.annotation.formats import annotation_table
from esc_eval.analysis.annotation.study import create_study
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow  # a real browser start; not beside: it bounds the next dialogue's opening at 100 ms
@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (apt-get install chromium)")
def test_two_annotators_score_with_the_keyboard_and_the_agreement_panel_shows_it(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    run = fake_run(tmp_path / "run", 30)
    with serving([run]) as (base, service):
        store = service.store
        create_study(store, service.viewer.index, study_request(annotators=("ann1", "ann2"), overlap=2, sample=4))
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=_chromium(), headless=True, args=["--no-sandbox"])
            try:
                pages = {}
                for a in ("ann1", "ann2"):  # own contexts: own localStorage, like two people's browsers
                    page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
                    page.goto(f"{base}/?annotator={a}")
                    page.wait_for_selector(".dim.active[data-dim=fluency]")
                    pages[a] = page
                open_ms = []
                queues = {a: store.queue("s1", a) for a in pages}
                for pos in range(4):  # the two annotators take turns, dialogue by dialogue
                    for a, page in pages.items():
                        assert page.inner_text("#pos") == f"dialogue {pos + 1} of 4"
                        did = queues[a][pos][0]
                        if a == "ann1" and pos == 0:
                            page.keyboard.press("f")
                            page.keyboard.press("c")
                            page.keyboard.type("seeker's last turn is cut off")
                            page.keyboard.press("Escape")
                            page.keyboard.press("Enter")  # incomplete: it says so and stays
                            assert "score 7 more" in page.inner_text("#msg")
                        for dim in DIMENSION_NAMES:
                            page.keyboard.press(str(score_for(a, did, dim)))
                        page.wait_for_function("document.querySelectorAll('.dim .state.saved').length === 7")
                        page.keyboard.press("Enter")
                        if pos < 3:
                            page.wait_for_function(f"document.querySelector('#pos').textContent === 'dialogue {pos + 2} of 4'")
                            open_ms.append(page.evaluate("window.lastOpenMs"))
                        else:
                            page.wait_for_function("document.querySelector('#pos').textContent === 'queue done'")
                pages["ann1"].screenshot(path=str(tmp_path / "done.png"))
                organiser = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
                organiser.goto(f"{base}/")
                organiser.wait_for_selector("#btn-results:not([hidden])")
                organiser.keyboard.press("r")
                organiser.wait_for_selector("#agreement tr[data-dim=all] td.alpha")
                shown = {tr.get_attribute("data-dim"): (tr.query_selector("td.kappa").inner_text(),
                                                         tr.query_selector("td.alpha").inner_text())
                         for tr in organiser.query_selector_all("#agreement tbody tr")}
                progress = {tr.get_attribute("data-annotator"): tr.query_selector("td.done").inner_text()
                            for tr in organiser.query_selector_all("#progress tbody tr")}
                judge_rows = organiser.query_selector_all("table.judge tbody tr")
                organiser.screenshot(path=str(tmp_path / "results.png"))
            finally:
                browser.close()
    answers = store.answers("s1")
    assert len(answers) == 2 * 4 * 7
    assert all(r.score == score_for(r.annotator, r.dialogue_id, r.dimension) for r in answers.itertuples())
    first = queues["ann1"][0][0]
    assert store.item_state("s1", "ann1", first) == {"note": "seeker's last turn is cut off", "flagged": True,
                                                     "skipped": False}
    table = annotation_table(store, "s1", service.viewer.index)
    want = agreement_summary(table[["annotator", "dialogue_id", "dimension", "score"]].astype({"score": float}))
    fmt = lambda v: "n/a" if v != v else f"{v:.3f}"  # noqa: E731 - NaN check
    assert shown == {r.dimension: (fmt(r.mean_pairwise_kappa), fmt(r.krippendorff_alpha)) for r in want.itertuples()}
    assert shown["all"][1] != "n/a"
    assert progress == {"ann1": "4", "ann2": "4"}
    assert len(judge_rows) == 8  # the run's judge: seven dimensions and the average
    print(f"next dialogue opened in {max(open_ms):.1f} ms at most (page, prefetched)")
    assert max(open_ms) < 100
