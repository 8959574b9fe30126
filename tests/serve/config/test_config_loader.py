"""The one config loader (serve/config/base.py): YAML in, validated at the door, every error one line
naming the file and the field; a typo in a field name is an error, not a silent default."""
from __future__ import annotations

import pytest
from pydantic import Field

from esc_eval.serve.config import ConfigError, ConfigModel, load_config, load_config_file, read_yaml_mapping


class Inner(ConfigModel):
    workers: int = Field(1, ge=1, description="Workers.")


class Outer(ConfigModel):
    name: str = Field("run", description="A name.")
    execution: Inner = Field(default_factory=Inner, description="How it runs.")


def test_a_good_file_and_dotted_overrides(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("name: a\nexecution: {workers: 2}\n")
    assert load_config(p, Outer).execution.workers == 2
    cfg = load_config(p, Outer, {"execution.workers": 3, "name": None})  # None: the option was not given
    assert (cfg.name, cfg.execution.workers) == ("a", 3)
    assert load_config(None, Outer, {"execution.workers": 4}).execution.workers == 4


@pytest.mark.parametrize("text, message", [
    ("execution: {workers: 0}\n", "field 'execution.workers': Input should be greater than or equal to 1"),
    ("execution: {wokers: 2}\n", "field 'execution.wokers': Extra inputs are not permitted"),
    ("- a\n- b\n", "expected a mapping at the top level, got list"),
    ("name: [unclosed\n", "not valid YAML"),
])
def test_every_bad_file_is_one_line_naming_the_file_and_field(tmp_path, text, message):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(p, Outer)
    assert str(e.value).startswith(f"{p}: ") and message in str(e.value) and "\n" not in str(e.value)


def test_missing_and_non_utf8_files_and_the_callers_error_type(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "none.yaml", Outer)
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(KeyError, match="not UTF-8 text"):
        read_yaml_mapping(bad, KeyError)
    (tmp_path / "ok.yaml").write_text("{}\n")
    assert load_config_file(tmp_path / "ok.yaml", Outer) == Outer()
