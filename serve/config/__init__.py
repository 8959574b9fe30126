"""serve.config: the run-config loader every package uses. Pydantic models with a description on
every field (`ConfigModel`), YAML read and validated at the door with messages that name the bad
field (`load_config`, `ConfigError`), and a comma-separated option read as a list (`comma_list`).

Layer: the floor of serve; imports nothing of the project. sim, train and cli load their configs
through this room (`from esc_eval.serve.config import load_config`), never through serve's other rooms."""
from esc_eval.serve.config.base import (ConfigError, ConfigModel, comma_list, describe_validation_error, load_config,
                                        load_config_file, read_yaml_mapping, validate_config)

__all__ = ["ConfigError", "ConfigModel", "comma_list", "describe_validation_error", "load_config", "load_config_file",
           "read_yaml_mapping", "validate_config"]
