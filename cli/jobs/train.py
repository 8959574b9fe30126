"""`esc-eval train role|rank --config FILE`: LoRA SFT of ESC-Role and ESC-RANK on Ray Train.

Both validate the config and the data before Ray starts (a bad field or a bad annotation row
exits with code 2 and a message naming it), show a rich progress bar per adapter while Ray
Train runs, and end with a summary table (train/jobs/terminal.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from esc_eval.train.errors import TrainConfigError, TrainInputError
from esc_eval.train.jobs.terminal import console

app = typer.Typer(no_args_is_help=True, help="LoRA SFT of ESC-Role and ESC-RANK on Ray Train + DeepSpeed.")
ConfigOption = Annotated[Path, typer.Option("--config", "-c", help="YAML job config (see train/configs/).",
                                            exists=False, dir_okay=False)]


def _failed(e: Exception) -> typer.Exit:
    """A bad config or bad data: the message, and exit 2."""
    console.print(f"[red]error:[/red] {e}")
    return typer.Exit(code=2)


@app.command("role")
def train_role(config: ConfigOption) -> None:
    """Train ESC-Role (LoRA on the role-play dialogues; loss on the seeker's turns)."""
    from esc_eval.train.jobs.terminal import train_role_command

    try:
        train_role_command(config)
    except (TrainConfigError, TrainInputError) as e:
        raise _failed(e) from None


@app.command("rank")
def train_rank(config: ConfigOption) -> None:
    """Train ESC-RANK (LoRA judges from annotations) and report Table 4 on the test split."""
    from esc_eval.train.jobs.terminal import train_rank_command

    try:
        train_rank_command(config)
    except (TrainConfigError, TrainInputError) as e:
        raise _failed(e) from None
