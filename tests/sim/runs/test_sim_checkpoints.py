"""Turn checkpoints as one append-only log per writer (sim/runs/checkpoints.py)."""
import asyncio
import json

from esc_eval.sim.runs.checkpoints import TurnCheckpoints, clear_folder, compact_folder, read_folder


def turns(n, tag="t"):
    return [{"index": i, "speaker": "seeker" if i % 2 else "assistant", "text": f"{tag}{i}"} for i in range(n)]


def test_each_save_appends_only_the_new_turns_and_a_reader_sees_all(tmp_path):
    log = TurnCheckpoints(tmp_path)
    grown = []  # the caller's list, grown by a turn between saves
    for t in turns(3):
        grown.append(t)
        log.save("d1", grown)
    log.save("d2", turns(2, "x"))
    log.flush()
    lines = [e for x in log.path.read_text().splitlines() for e in json.loads(x)]
    assert [(x["d"], x["from"], len(x["turns"])) for x in lines] == [("d1", 0, 1), ("d1", 1, 1), ("d1", 2, 1), ("d2", 0, 2)]
    log.save("d1", turns(3))  # another list: written whole
    log.flush()
    (last,) = json.loads(log.path.read_text().splitlines()[-1])
    assert (last["from"], len(last["turns"])) == (0, 3)
    assert read_folder(tmp_path) == {"d1": turns(3), "d2": turns(2, "x")}
    log.done(["d1"])
    assert read_folder(tmp_path) == {"d2": turns(2, "x")}


def test_turns_finished_in_one_loop_pass_leave_in_one_write(tmp_path, monkeypatch):
    import os

    writes = []
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: writes.append(data) or real(fd, data))
    log = TurnCheckpoints(tmp_path)

    async def main():
        for i in range(50):
            log.save(f"d{i}", turns(2))
        assert writes == []  # not yet: at the end of this pass of the loop
        await asyncio.sleep(0)
        assert len(writes) == 1 and writes[0].count(b"\n") == 1 and len(json.loads(writes[0])) == 50

    asyncio.run(main())
    assert len(read_folder(tmp_path)) == 50


def test_a_torn_last_line_is_ignored_and_a_gap_keeps_the_contiguous_turns(tmp_path):
    log = TurnCheckpoints(tmp_path)
    log.save("d1", turns(2))
    log.save("d2", turns(3))
    log.close()
    with open(log.path, "ab") as f:
        f.write(b'{"d": "d1", "from": 2, "turns": [{"ind')  # killed mid-write
    assert read_folder(tmp_path) == {"d1": turns(2), "d2": turns(3)}
    (tmp_path / "other.log").write_text(json.dumps({"d": "d3", "from": 4, "turns": turns(1)}) + "\n")
    assert "d3" not in read_folder(tmp_path)  # turns 0-3 missing: nothing usable


def test_another_writer_takes_over_a_dead_writers_dialogue_and_rewrites_it_whole(tmp_path):
    dead = TurnCheckpoints(tmp_path)
    dead.save("d1", turns(5))
    dead.flush()  # then the process dies: no close, no done
    heir = TurnCheckpoints(tmp_path)
    assert heir.load("d1") == turns(5)
    heir.save("d1", turns(7))  # resumed and continued: written whole into the heir's own log
    heir.flush()
    (first,) = json.loads(heir.path.read_text().splitlines()[0])
    assert first["from"] == 0 and len(first["turns"]) == 7
    assert read_folder(tmp_path)["d1"] == turns(7)
    heir.done(["d1"])
    assert read_folder(tmp_path) == {}  # done anywhere is done everywhere


def test_refresh_reads_what_a_writer_lost_later_left(tmp_path):
    live = TurnCheckpoints(tmp_path)
    other = TurnCheckpoints(tmp_path)
    other.save("d9", turns(4))
    other.flush()
    assert live.load("d9") == []  # opened before: not seen until asked
    live.refresh()
    assert live.load("d9") == turns(4)


def test_a_big_log_rotates_at_a_flush_into_a_log_of_its_live_dialogues(tmp_path):
    log = TurnCheckpoints(tmp_path, rotate_bytes=2000)
    for i in range(40):
        log.save(f"d{i}", turns(3))
    log.flush()
    old = log.path
    log.done([f"d{i}" for i in range(10)])
    assert log.path == old  # big, but mostly live dialogues: a rewrite would cost as much as it saves
    log.done([f"d{i}" for i in range(10, 38)])
    assert not old.exists() and log.path != old
    assert log.path.stat().st_size < 1000
    assert read_folder(tmp_path) == {"d38": turns(3), "d39": turns(3)}


def test_compact_and_clear_folder(tmp_path):
    for i in range(3):
        w = TurnCheckpoints(tmp_path)
        w.save(f"d{i}", turns(i + 1))
        w.save("gone", turns(2))
        w.done(["gone"]) if i == 2 else w.flush()
    assert compact_folder(tmp_path) == 3
    assert len(list(tmp_path.glob("*.log"))) == 1
    assert read_folder(tmp_path) == {f"d{i}": turns(i + 1) for i in range(3)}
    clear_folder(tmp_path)
    assert read_folder(tmp_path) == {} and not list(tmp_path.iterdir())
    assert compact_folder(tmp_path / "missing") == 0
    w = TurnCheckpoints(tmp_path)
    w.save("has-a-row", turns(2))
    w.save("in-flight", turns(2))
    w.close()
    assert compact_folder(tmp_path, drop={"has-a-row"}) == 1 and list(read_folder(tmp_path)) == ["in-flight"]


def test_across_logs_the_longest_wins_in_either_file_order(tmp_path):
    def line(start, n):
        return json.dumps({"d": "d1", "from": start, "turns": turns(n)[start:]}) + "\n"

    dead = "".join(line(i, i + 1) for i in range(5))  # turn by turn, 5 turns
    heir = line(0, 7) + line(7, 8)  # took it over whole, then went on
    for first, second in (("a", "b"), ("b", "a")):
        folder = tmp_path / first
        folder.mkdir()
        (folder / f"{first}.log").write_text(dead)
        (folder / f"{second}.log").write_text(heir)
        assert read_folder(folder)["d1"] == turns(8)


def test_any_text_round_trips(tmp_path):
    odd = [{"index": 0, "speaker": "seeker", "text": "中文 \ud800 lone surrogate \n\"quoted\" \x00"}]
    log = TurnCheckpoints(tmp_path)
    log.save("d1", odd)
    log.close()
    assert read_folder(tmp_path) == {"d1": odd}
