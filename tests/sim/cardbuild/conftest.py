"""The card-build tests' shared helper, cardbuild_fakes.py (a scripted card model), lives in this
folder and the rooms' tests import it by name (stages/test_cardbuild_risk.py): this folder goes on
sys.path before any test below it is collected, whichever runs first."""
from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))
