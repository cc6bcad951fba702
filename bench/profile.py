"""Where a server's CPU goes: py-spy samples attributed to parts of the stack by module path.

Each sample is charged to the innermost frame that belongs to a known part (LangGraph, the
checkpointer, LangChain, the OpenAI client and its HTTP pool, the database drivers, the HTTP
server, Juru itself); frames of the standard library, pydantic and the like are neutral and
charge their caller. Samples with no known frame at all are the event loop and the rest.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

# Innermost match wins; the order only matters for prefixes of one another. anyio is neutral:
# both httpx (the model client) and Starlette (thread pool, streams) run on it.
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("checkpointer", ("/langgraph/checkpoint/", "/ormsgpack/", "langgraph_checkpoint")),
    ("langgraph", ("/langgraph/",)),
    ("langchain", ("/langchain_core/", "/langchain_openai/", "/langsmith/")),
    (
        "openai client + HTTP pool",
        # aiohttp: the SDK's transport, and the pool Juru's model calls are posted on directly.
        (
            "/openai/",
            "/httpx/",
            "/httpx2/",
            "/httpcore/",
            "/httpcore2/",
            "/h11/",
            "/aiohttp/",
            "/yarl/",
            "/multidict/",
        ),
    ),
    ("database", ("/sqlalchemy/", "/aiosqlite/", "/sqlite3/", "/psycopg/", "/psycopg_pool/")),
    ("HTTP server", ("/uvicorn/", "/starlette/", "/fastapi/", "/httptools/")),
    ("juru", ("/juru/",)),
)
OTHER = "event loop + other"
# Frames up to the event loop's are the process's root (uvicorn's `Server.run`): not a part.
LOOP_FRAMES = ("/asyncio/runners.py", "/asyncio/events.py", "/asyncio/base_events.py")


def py_spy() -> str | None:
    """The py-spy executable beside this Python, or on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


def part_of(frame: str) -> str | None:
    # A raw py-spy frame reads `function (path/to/file.py:line)`.
    path = frame[frame.rfind("(") + 1 :]
    for part, markers in PARTS:
        if any(marker in path for marker in markers):
            return part
    return None


def attribute(collapsed: str) -> Counter[str]:
    """Samples per part, from py-spy's raw (collapsed stack) output."""
    samples: Counter[str] = Counter()
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        roots = [i for i, frame in enumerate(frames) if any(m in frame for m in LOOP_FRAMES)]
        if roots:
            frames = frames[roots[-1] + 1 :]
        part = OTHER
        for frame in reversed(frames):
            found = part_of(frame)
            if found is not None:
                part = found
                break
        samples[part] += int(count)
    return samples


class Profiler:
    """py-spy recording a process until `stop()`; does nothing where py-spy is missing."""

    def __init__(self, pid: int, output: Path, rate: int = 97) -> None:
        self.pid, self.output, self.rate = pid, output, rate
        # JURU_BENCH_WAITS=1: sample waiting threads too, with native frames, to see where
        # time goes that is not CPU (lock waits, SQLite's busy handler); the split is then
        # of wall time, not of CPU.
        self.waits = os.environ.get("JURU_BENCH_WAITS") == "1"
        self.process: subprocess.Popen[bytes] | None = None
        self.error = ""

    def start(self) -> Profiler:
        executable = py_spy()
        if executable is None:
            self.error = "py-spy is not installed (pip install -e '.[bench]')"
            return self
        command = [executable, "record", "--pid", str(self.pid), "--rate", str(self.rate)]
        command.append("--subprocesses")  # the API process and its worker processes
        mode = ["--idle", "--native"] if self.waits else ["--nonblocking", "--gil"]
        command += ["--format", "raw", *mode, "--full-filenames", "--output", str(self.output)]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
        return self

    def stop(self) -> Counter[str] | None:
        """Stop recording; samples per part, or None (with `error` set) when none were taken."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGINT)
        _, stderr = self.process.communicate(timeout=60)
        if not self.output.exists():
            self.error = f"py-spy wrote no profile: {stderr.decode(errors='replace')[-300:]}"
            return None
        return attribute(self.output.read_text())


def shares(samples: Counter[str] | None) -> dict[str, float]:
    """Each part's fraction of the samples, in a stable order."""
    if not samples:
        return {}
    total = sum(samples.values())
    names = [name for name, _ in PARTS] + [OTHER]
    return {name: samples.get(name, 0) / total for name in names}


def callers(collapsed: str, part: str, limit: int = 12) -> list[tuple[str, int]]:
    """For the samples charged to `part`: the innermost Juru frame above them (who asked)."""
    found: Counter[str] = Counter()
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        if attribute(line) != Counter({part: int(count)}):
            continue
        ours = [frame for frame in stack.split(";") if "/juru/" in frame]
        name = ours[-1].split(" (")[0] if ours else "(no Juru frame: another thread)"
        found[name] += int(count)
    return found.most_common(limit)


def leaves(collapsed: str, depth: int = 5, limit: int = 15) -> list[tuple[str, int]]:
    """The most sampled innermost `depth` frames (function names only)."""
    found: Counter[str] = Counter()
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            frames = [frame.split(" (")[0] for frame in stack.split(";")[-depth:]]
            found[" <- ".join(reversed(frames))] += int(count)
    return found.most_common(limit)


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.profile [--leaves] FILE...`: the split and who in Juru asks for each
    part, or the most sampled innermost frames."""
    paths = list(argv if argv is not None else sys.argv[1:])
    if paths and paths[0] == "--leaves":
        for path in paths[1:]:
            print(path)
            for stack, count in leaves(Path(path).read_text()):
                print(f"  {count:6}  {stack[:200]}")
        return 0
    for path in paths:
        collapsed = Path(path).read_text()
        samples = attribute(collapsed)
        total = sum(samples.values())
        print(f"{path}: {total} samples")
        for part, count in samples.most_common():
            print(f"  {part:28} {100 * count / total:5.1f}%")
            for name, hits in callers(collapsed, part, 6):
                print(f"      {100 * hits / total:5.1f}%  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
