"""`juru.client`: typed Python clients of a Juru server, `Juru` (blocking) and `AsyncJuru`.

    from juru.client import Juru

    with Juru() as juru:  # JURU_BASE_URL, JURU_API_KEY
        agent = juru.agents.create("Cuaca", "juru/demo", tools=[...])
        thread = juru.threads.create(agent.id)
        run = juru.runs.run_until_done(thread.id, "Weather in Jakarta?", tools={"get_weather": f})

See docs/client.md.
"""

from juru.client._async import AsyncJuru, AsyncPager
from juru.client._sync import Juru, Pager
from juru.client.errors import (
    APIConnectionError,
    APIStatusError,
    AuthenticationError,
    ConflictError,
    GoneError,
    InsufficientBalanceError,
    InvalidRequestError,
    JuruError,
    NotFoundError,
    RateLimitError,
    RequestTooLargeError,
    ServerError,
    UnknownToolError,
    UnprocessableError,
)
from juru.client.models import (
    Account,
    Agent,
    AgentTool,
    Deleted,
    Document,
    File,
    Message,
    Model,
    Page,
    Run,
    RunEvent,
    Thread,
    ToolCall,
    Usage,
    UsageLine,
)

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "Account",
    "Agent",
    "AgentTool",
    "AsyncJuru",
    "AsyncPager",
    "AuthenticationError",
    "ConflictError",
    "Deleted",
    "Document",
    "File",
    "GoneError",
    "InsufficientBalanceError",
    "InvalidRequestError",
    "Juru",
    "JuruError",
    "Message",
    "Model",
    "NotFoundError",
    "Page",
    "Pager",
    "RateLimitError",
    "RequestTooLargeError",
    "Run",
    "RunEvent",
    "ServerError",
    "Thread",
    "ToolCall",
    "UnknownToolError",
    "UnprocessableError",
    "Usage",
    "UsageLine",
]
