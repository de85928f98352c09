"""
The public API's types: ``tests/typing_api.py`` passes ``mypy --strict``.
"""

from __future__ import annotations

import re
from pathlib import Path

from mypy import api

API = Path(__file__).with_name("typing_api.py")
FLAGS = ["--strict", "--warn-unused-ignores", "--enable-error-code", "ignore-without-code"]

LOST = '''
def lost(name: str, **options: Any) -> Callable[[Any], Any]:
    """A decorator that forgets the signature it decorates."""
    raise NotImplementedError
'''


def mypy(path: Path) -> tuple[str, int]:
    """Run mypy with the project's strict flags on *path*; return its report and exit status."""
    stdout, stderr, status = api.run([*FLAGS, str(path)])
    return stdout + stderr, status


class TestTypingApi:
    def test_mypy_strict_accepts_the_api_file(self) -> None:
        """typing_api.py type-checks cleanly: every signature survives decoration."""
        report, status = mypy(API)

        assert ("Success: no issues found in 1 source file\n", 0) == (report, status)

    def test_the_check_fails_when_signatures_are_lost(self, tmp_path: Path) -> None:
        """With a signature-losing decorator in place of subagent/step, the same file fails."""
        source = API.read_text()
        source = re.sub(r"@ar\.(subagent|step)\(", "@lost(", source)
        source = source.replace("\n\n@lost(", LOST + "\n\n@lost(", 1)
        broken = tmp_path / "typing_api_lost.py"
        broken.write_text(source)

        report, status = mypy(broken)

        decorated = re.compile(r"\b(research|write|stream|astream|plan)\b")
        expected = {
            number
            for number, line in enumerate(source.splitlines(), 1)
            if "# type: ignore" in line and decorated.search(line)
        }
        unused = {
            int(number) for number in re.findall(r":(\d+): error: Unused \"type: ignore\"", report)
        }
        assert 1 == status
        assert 10 == len(expected)
        assert expected == unused
