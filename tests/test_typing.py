"""
The public API's types: ``tests/typing_api.py`` passes ``mypy --strict``.
"""

from __future__ import annotations

import re
from pathlib import Path

from _docs_blocks import blocks
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

        decorated = re.compile(r"\b(research|write|stream|astream|plan|typed|typed_step)\b")
        expected = {
            number
            for number, line in enumerate(source.splitlines(), 1)
            if "# type: ignore" in line and decorated.search(line)
        }
        unused = {
            int(number) for number in re.findall(r":(\d+): error: Unused \"type: ignore\"", report)
        }
        assert 1 == status
        assert 12 == len(expected)
        assert expected == unused


# The frameworks' own packages are not followed (their types cost a minute of CPU to
# analyse, and are theirs to keep): the examples' use of *our* API is what is checked.
README_CONFIG = """\
[mypy]
[mypy-pydantic_ai.*,langgraph.*,langchain_core.*,agents.*,openai.*]
follow_imports = skip
# Their tool decorators are untyped once their packages are skipped.
[mypy-pydantic_ai_agent,openai_agents_agent]
disallow_untyped_decorators = False
"""


def readme_blocks() -> list[str]:
    """The ```python blocks of the README and the docs site, in order (the README's first)."""
    return [block.code for block in blocks() if block.kind not in {"include", "not-run"}]


def mypy_files(paths: list[Path], config: Path) -> tuple[str, int]:
    """Run mypy --strict on *paths* with *config*; return its report and exit status."""
    stdout, stderr, status = api.run([*FLAGS, "--config-file", str(config), *map(str, paths)])
    return stdout + stderr, status


class TestReadmeTypes:
    def test_every_python_example_passes_mypy_strict(self, tmp_path: Path) -> None:
        """Each README and docs example, and each of examples/, type-checks under --strict."""
        config = tmp_path / "mypy.ini"
        config.write_text(README_CONFIG)
        paths = []
        for index, block in enumerate(readme_blocks()):
            path = tmp_path / f"readme_{index}.py"
            path.write_text(block)
            paths.append(path)
        paths += sorted((Path(__file__).parent.parent / "examples").glob("*.py"))

        report, status = mypy_files(paths, config)

        assert len(paths) >= 10
        assert (f"Success: no issues found in {len(paths)} source files\n", 0) == (report, status)

    def test_the_check_fails_on_an_unannotated_example(self, tmp_path: Path) -> None:
        """The same check refuses the README's first example with a bare ``-> dict``."""
        config = tmp_path / "mypy.ini"
        config.write_text(README_CONFIG)
        first = readme_blocks()[0]
        assert "-> dict[str, Any]:" in first
        path = tmp_path / "readme_bare.py"
        path.write_text(first.replace("-> dict[str, Any]:", "-> dict:", 1))

        report, status = mypy_files([path], config)

        assert 1 == status
        assert 'Missing type arguments for generic type "dict"' in report
