"""The README's Python examples run as written."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

README = Path(__file__).parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


class TestReadme:
    def test_has_examples(self) -> None:
        """The README shows Python examples at all."""
        assert len(BLOCKS) >= 1

    @pytest.mark.parametrize("index", range(len(BLOCKS)))
    def test_example_runs(
        self, index: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Each ```python block of the README runs without error."""
        script = tmp_path / f"example_{index}.py"
        script.write_text(BLOCKS[index])

        runpy.run_path(str(script), run_name="__main__")

        assert "Traceback" not in capsys.readouterr().err
