"""The committed classMethods file is what `juru runtime class-methods` prints and what the
class-method table holds."""

from __future__ import annotations

import json
import subprocess
import sys

from juru.runtime.methods import CLASS_METHODS, STREAM_MODES, UNARY_MODES, class_methods_json
from tests.support.server import REPO

COMMITTED = REPO / "docs" / "agent-engine" / "class_methods.json"


def test_the_committed_file_is_the_generated_list() -> None:
    assert COMMITTED.read_text() == class_methods_json(), (
        "regenerate it: juru runtime class-methods > docs/agent-engine/class_methods.json"
    )


def test_the_cli_prints_the_generated_list() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "juru", "runtime", "class-methods"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    assert done.stdout == class_methods_json()


def test_each_method_has_one_handler_matching_its_api_mode() -> None:
    spec = json.loads(class_methods_json())
    assert [entry["name"] for entry in spec] == [method.name for method in CLASS_METHODS]
    for method, entry in zip(CLASS_METHODS, spec, strict=True):
        assert entry["api_mode"] == method.api_mode in UNARY_MODES | STREAM_MODES
        assert (method.stream is not None) == method.streams == (method.unary is None)
        assert entry["parameters"]["type"] == "object"
    assert len({entry["name"] for entry in spec}) == len(spec)
