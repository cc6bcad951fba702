"""The terminal (`juru chat`, `juru agents`) against a real `juru serve` process.

`juru chat` is driven through a pseudo-terminal with pexpect, as a person types: the
`output for get_weather(...)>` prompt of a client tool, local `--tools` handlers, Ctrl-C during
a slow model call (the run is cancelled), Ctrl-C and Ctrl-D at the prompt, and a playground
review approved. `juru agents` runs as a command on YAML files. One server (SQLite, the fake
OpenAI-compatible model beside it, the playground on) serves the whole module.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.e2e.test_hosted_runs import FAKE_MODEL, Api, FakeOpenAIProcess, juru_serve, until
from tests.support.hosted import WEATHER_TOOL, demo_answer
from tests.support.server import REPO, api_key, free_port, juru_command

pytestmark = pytest.mark.e2e

STEP_SECONDS = 60
THREAD_RE = re.compile(r"on thread (thr_\w+)")


@dataclass
class Served:
    base_url: str
    key: str
    fake: FakeOpenAIProcess

    def api(self) -> Api:
        return Api(self.base_url, self.key)


@pytest.fixture(scope="module")
def served(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("terminal")
    database_url = f"sqlite:///{home}/juru.db"
    fake = FakeOpenAIProcess(home / "fake_openai.log").start()
    server = juru_serve(database_url, home / "server.log", PLAYGROUND_ENABLED="true", **fake.env())
    try:
        with server:
            yield Served(server.base_url, api_key(database_url), fake)
    finally:
        fake.stop()


def client_env(served: Served, **extra: str) -> dict[str, str]:
    """The environment of a terminal command: the key in JURU_API_KEY, no server URL (the
    commands get --base-url), plain output (no colours, no wrapping at 80 columns)."""
    env = {k: v for k, v in os.environ.items() if k not in {"JURU_API_KEY", "JURU_BASE_URL"}}
    return {
        **env,
        "JURU_API_KEY": served.key,
        "TERM": "dumb",
        "PYTHONIOENCODING": "utf-8",
        "COLUMNS": "200",
        "PYTHONPATH": pythonpath(),
        **extra,
    }


@contextmanager
def chat(served: Served, *args: str, log: Path) -> Iterator[pexpect.spawn]:
    """`juru chat ARGS` in a pseudo-terminal, at its first prompt (killed if still there at the
    end; what it printed is in `log`)."""
    command = [*juru_command(), "chat", *args, "--base-url", served.base_url]
    with log.open("w") as transcript:
        child = pexpect.spawn(
            command[0],
            command[1:],
            cwd=str(REPO),
            env=client_env(served),
            encoding="utf-8",
            timeout=STEP_SECONDS,
            dimensions=(50, 220),
            # As a shell starts it at a terminal: a test run started in the background by a
            # shell without job control ignores SIGINT, and the chat would inherit that.
            preexec_fn=_interruptible,
        )
        child.logfile_read = transcript
        try:
            child.expect_exact("you> ")
            yield child
        finally:
            child.close(force=True)


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ended(child: pexpect.spawn) -> int:
    """The chat's exit status, once it has exited by itself."""
    child.expect(pexpect.EOF)
    child.close()
    assert child.signalstatus is None
    status: int = child.exitstatus
    return status


def thread_of(child: pexpect.spawn) -> str:
    found = THREAD_RE.search(child.before or "")
    assert found, child.before
    return found.group(1)


def weather_agent(api: Api, **fields: Any) -> str:
    agent = api.create_agent(model_id="juru/demo", tools=[WEATHER_TOOL], **fields)
    agent_id: str = agent["id"]
    return agent_id


# --- juru chat AGENT_ID -------------------------------------------------------------------------


def test_chat_asks_for_a_client_tool_output_and_shows_the_answer_and_cost(
    served: Served, tmp_path: Path
) -> None:
    with served.api() as api:
        agent_id = weather_agent(api)
        with chat(served, agent_id, log=tmp_path / "chat.log") as child:
            thread_id = thread_of(child)
            child.sendline("Cuaca di Jakarta?")
            child.expect_exact('→ get_weather({"city": "Jakarta"})')
            child.expect_exact('output for get_weather({"city": "Jakarta"})> ')
            child.sendline("Jakarta: 31°C, berawan")
            child.expect_exact(demo_answer("get_weather", "Jakarta: 31°C, berawan"))
            child.expect_exact("succeeded · 2 steps · cost Rp0")
            child.expect_exact("you> ")
            child.sendeof()
            assert ended(child) == 0

        [run] = api.runs_of(thread_id)
        assert run["status"] == "succeeded"
        tool_message = api.messages(thread_id)[2]
        assert (tool_message["role"], tool_message["content"]) == ("tool", "Jakarta: 31°C, berawan")


def test_chat_answers_tools_with_local_handlers_turn_after_turn(
    served: Served, tmp_path: Path
) -> None:
    tools = "tests.support.terminal_tools:TOOLS"
    with served.api() as api:
        agent_id = weather_agent(api)
        with chat(served, agent_id, "--tools", tools, log=tmp_path / "chat.log") as child:
            thread_id = thread_of(child)
            for city in ("Jakarta", "Bandung"):
                output = f"{city}: 30°C, cerah (from the test handler)"
                child.sendline(f"Cuaca di {city}?")
                child.expect_exact(f"← get_weather: {output}")
                # The handler answered: no prompt for the output comes before the answer.
                seen = child.expect_exact([demo_answer("get_weather", output), "output for"])
                assert seen == 0, "the chat asked for an output that --tools should have given"
                child.expect_exact("succeeded · 2 steps · cost Rp0")
                child.expect_exact("you> ")
            child.sendintr()  # Ctrl-C at the prompt ends the chat
            assert ended(child) == 0

        runs = api.runs_of(thread_id)
        assert [run["status"] for run in runs] == ["succeeded", "succeeded"]
        outputs = [m["content"] for m in api.messages(thread_id) if m["role"] == "tool"]
        assert outputs == [
            "Jakarta: 30°C, cerah (from the test handler)",
            "Bandung: 30°C, cerah (from the test handler)",
        ]


def test_ctrl_c_during_a_slow_run_cancels_it(served: Served, tmp_path: Path) -> None:
    served.fake.script([{"content": "this answer never arrives", "delay": 30}])
    with served.api() as api:
        agent = api.create_agent(model_id=FAKE_MODEL, max_steps=3)
        with chat(served, agent["id"], log=tmp_path / "chat.log") as child:
            thread_id = thread_of(child)
            asked = len(served.fake.requests())
            child.sendline("Ceritakan sesuatu tentang Jakarta.")
            child.expect_exact("· running")
            until(lambda: len(served.fake.requests()) > asked, "the slow model call")
            [running] = api.runs_of(thread_id)
            assert running["status"] == "running"
            child.sendintr()
            child.expect(r"cancelled run (run_\w+)")
            run_id = child.match.group(1)
            child.expect_exact("you> ")
            assert run_id == running["id"]
            assert api.run(run_id)["status"] == "cancelled"
            child.sendeof()
            assert ended(child) == 0
    assert "this answer never arrives" not in (tmp_path / "chat.log").read_text()


def test_chat_with_an_unknown_agent_is_one_error_line(served: Served, tmp_path: Path) -> None:
    done = juru(served, "chat", "agt_nope", "--base-url", served.base_url, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().startswith("error: "), done.stderr
    assert "not_found" in done.stderr and "Traceback" not in done.stderr + done.stdout


# --- juru chat --feature ------------------------------------------------------------------------


def test_feature_chat_asks_for_a_review_and_resumes_with_the_approval(
    served: Served, tmp_path: Path
) -> None:
    with chat(served, "--feature", "Human-in-the-loop", log=tmp_path / "chat.log") as child:
        child.sendline("Email ana@example.com about lunch")
        child.expect_exact("review: send_email(")
        child.expect_exact("approve / edit / reject? ")
        child.sendline("approve")
        child.expect_exact("← send_email: E-mail to ana@example.com")
        child.expect(r"Human-in-the-loop> .*The tool send_email returned: E-mail to ana@example")
        child.expect_exact("done in")
        child.expect_exact("you> ")
        child.sendeof()
        assert ended(child) == 0


def test_feature_chat_edits_one_call_and_rejects_the_next(served: Served, tmp_path: Path) -> None:
    with chat(served, "--feature", "Human-in-the-loop", log=tmp_path / "chat.log") as child:
        child.sendline("Email ana@example.com about lunch")
        child.expect_exact("approve / edit / reject? ")
        child.sendline("edit")
        child.expect_exact("arguments (JSON object)> ")
        child.sendline("[1, 2]")
        child.expect_exact("the arguments must be a JSON object")
        child.expect_exact("arguments (JSON object)> ")
        edited = {"to": "budi@example.com", "subject": "lunch", "body": "At noon?"}
        child.sendline(json.dumps(edited))
        child.expect_exact("← send_email: E-mail to budi@example.com")
        child.expect_exact("you> ")
        child.sendline("Email ana@example.com about dinner")
        child.expect_exact("approve / edit / reject? ")
        child.sendline("reject")
        child.expect_exact("message for the model> ")
        child.sendline("not tonight")
        child.expect(r"send_email.*not tonight")
        child.expect_exact("you> ")
        child.sendeof()
        assert ended(child) == 0


# --- juru agents ----------------------------------------------------------------------------------

AGENT_YAML = """\
name: Cuaca {suffix}
model_id: juru/demo
system_prompt: {prompt}
tools:
  - type: function
    function:
      name: get_weather
      description: Get the current weather for a city
      parameters:
        type: object
        properties:
          city: {{type: string}}
        required: [city]
builtin_tools: [rag_search]
max_steps: 7
"""


def juru(served: Served, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*juru_command(), *args],
        env=client_env(served, **env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def pythonpath() -> str:
    """Run from another directory, `python -m juru` still imports this checkout's Juru."""
    return os.pathsep.join([str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")])


def test_agents_create_apply_and_list_from_a_yaml_file(served: Served, tmp_path: Path) -> None:
    suffix = tmp_path.name
    file = tmp_path / "agent.yaml"
    file.write_text(AGENT_YAML.format(suffix=suffix, prompt="Kamu asisten cuaca."))
    url = ["--base-url", served.base_url]

    created = juru(served, "agents", "create", "--file", str(file), *url, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    agent_id = created.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"agt_\w+", agent_id)
    assert f"created agent Cuaca {suffix}" in created.stderr

    file.write_text(AGENT_YAML.format(suffix=suffix, prompt="Jawab singkat saja."))
    applied = juru(served, "agents", "apply", "-f", str(file), *url, cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.strip().splitlines()[-1] == agent_id
    assert "updated agent" in applied.stderr
    with served.api() as api:
        agent = api.http.get(f"/v1/agents/{agent_id}").json()
    assert agent["system_prompt"] == "Jawab singkat saja."
    assert (agent["max_steps"], agent["builtin_tools"]) == (7, ["rag_search"])
    assert agent["tools"] == [WEATHER_TOOL]

    # Without --api-key or JURU_API_KEY, the local key in ./.juru is used, and said so.
    (tmp_path / ".juru").mkdir()
    (tmp_path / ".juru" / "local-api-key").write_text(served.key + "\n")
    listed = juru(served, "agents", "list", *url, cwd=tmp_path, JURU_API_KEY="")
    assert listed.returncode == 0, listed.stderr
    assert "using the local key in .juru/local-api-key" in listed.stderr
    [row] = [line for line in listed.stdout.splitlines() if agent_id in line]
    cells = [cell.strip() for cell in re.split(r"[│┃]", row) if cell.strip()]
    assert cells == [
        agent_id,
        f"Cuaca {suffix}",
        "juru/demo",
        "get_weather, rag_search (built-in)",
        "7",
    ]


def test_agents_apply_creates_an_agent_that_does_not_exist(served: Served, tmp_path: Path) -> None:
    file = tmp_path / "agent.yaml"
    file.write_text(AGENT_YAML.format(suffix=f"new {tmp_path.name}", prompt="Halo."))
    applied = juru(
        served, "agents", "apply", "-f", str(file), "--base-url", served.base_url, cwd=tmp_path
    )
    assert applied.returncode == 0, applied.stderr
    assert "created agent" in applied.stderr
    with served.api() as api:
        agent = api.http.get(f"/v1/agents/{applied.stdout.split()[-1]}").json()
    assert agent["name"] == f"Cuaca new {tmp_path.name}"


# Through the command, one case of each source of refusal: the YAML itself (a line), Juru's
# own checks (unknown keys) and the API's (a field). The other shapes of a bad file are
# tests/unit/test_terminal.py's, without a process each.
@pytest.mark.parametrize(
    ("text", "named"),
    [
        pytest.param("name: NAME\nmodel_id: [juru/demo\n", "line 3", id="yaml-syntax"),
        pytest.param(
            "name: NAME\nmodel: juru/demo\nprompt: x\n",
            "unknown keys: model, prompt",
            id="unknown-keys",
        ),
        pytest.param(
            "name: NAME\nmodel_id: juru/demo\ntools:\n  - type: function\n"
            "    function: {name: get_weather, parameters: 3}\n",
            "tools.0.function.parameters",
            id="api-validation",
        ),
        pytest.param("name: NAME\n", "model_id", id="api-missing-field"),
    ],
)
def test_an_agent_file_error_exits_1_naming_the_line_or_field(
    served: Served, tmp_path: Path, text: str, named: str
) -> None:
    file = tmp_path / "agent.yaml"
    file.write_text(text.replace("NAME", f"Broken {tmp_path.name}"))  # no agent has that name
    for command in ("create", "apply"):
        done = juru(
            served, "agents", command, "-f", str(file), "--base-url", served.base_url, cwd=tmp_path
        )
        assert done.returncode == 1, done.stdout + done.stderr
        [line] = done.stderr.strip().splitlines()
        assert line.startswith("error: ") and named in line, line
        assert done.stdout == ""


def test_an_unreachable_server_is_one_error_line(served: Served, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = juru(served, "agents", "list", "--base-url", url, cwd=tmp_path)
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"error: the Juru server at {url} cannot be reached ("), line
