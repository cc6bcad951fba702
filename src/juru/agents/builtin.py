"""The built-in features: ReAct, Human-in-the-loop and Subagents, on the default model."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.pregel import Pregel

from juru.agents.demo_tools import EMAIL_TOOLS, WEATHER_TOOLS
from juru.agents.features import Feature
from juru.agents.tool_agent import build_tool_agent, last_ai_message
from juru.models.catalog import ModelCatalog
from juru.settings import Settings

REACT_PROMPT = "You are a helpful assistant. Use get_weather for questions about the weather."
HITL_PROMPT = (
    "You are an assistant that can look up the weather and send e-mails. "
    "Sending an e-mail needs a human's approval."
)
SUPERVISOR_PROMPT = (
    "You are a supervisor. Delegate weather questions to ask_weather_agent and e-mail tasks to "
    "ask_email_agent, then report what they did."
)


def build_react(model: BaseChatModel) -> Pregel[Any, Any, Any, Any]:
    return build_tool_agent(model, WEATHER_TOOLS, system_prompt=REACT_PROMPT, name="ReAct")


def build_human_in_the_loop(model: BaseChatModel) -> Pregel[Any, Any, Any, Any]:
    return build_tool_agent(
        model,
        [*WEATHER_TOOLS, *EMAIL_TOOLS],
        system_prompt=HITL_PROMPT,
        guarded={"send_email"},
        name="Human-in-the-loop",
    )


def delegate_tool(name: str, description: str, subagent: Pregel[Any, Any, Any, Any]) -> BaseTool:
    """A tool that hands a request to `subagent` and returns its final answer."""

    async def ask(request: str) -> str:
        result = await subagent.ainvoke({"messages": [HumanMessage(request)]})
        answer = last_ai_message(result["messages"])
        return answer.text if answer is not None else ""

    return StructuredTool.from_function(coroutine=ask, name=name, description=description)


def build_subagents(model: BaseChatModel) -> Pregel[Any, Any, Any, Any]:
    weather_agent = build_tool_agent(
        model, WEATHER_TOOLS, system_prompt=REACT_PROMPT, checkpointer=False, name="weather_agent"
    )
    email_agent = build_tool_agent(
        model,
        EMAIL_TOOLS,
        system_prompt="You write and send e-mails with send_email.",
        checkpointer=False,
        name="email_agent",
    )
    delegates = [
        delegate_tool(
            "ask_weather_agent",
            "Ask the weather agent a weather question; it looks up current weather.",
            weather_agent,
        ),
        delegate_tool(
            "ask_email_agent",
            "Ask the e-mail agent to write and send an e-mail message.",
            email_agent,
        ),
    ]
    return build_tool_agent(model, delegates, system_prompt=SUPERVISOR_PROMPT, name="Subagents")


def builtin_features(settings: Settings, catalog: ModelCatalog) -> list[Feature]:
    """The three built-in features, each building its agent on `settings.default_model`."""
    model_id = settings.default_model

    def model() -> BaseChatModel:
        return catalog.chat_model(model_id, settings.provider_env)

    on_model = f"Model: {model_id}" + (" (offline demo model)." if model_id == "juru/demo" else ".")
    return [
        Feature(
            name="ReAct",
            description=(
                f"Basic agent with a weather tool; the same agent as POST /chat. {on_model}"
            ),
            build_agent=lambda: build_react(model()),
            examples=("What is the weather in sf?", "Cuaca di Jakarta?"),
        ),
        Feature(
            name="Human-in-the-loop",
            description=(
                "Weather and e-mail tools; every send_email call waits for your approve, edit "
                f"or reject decision. {on_model}"
            ),
            build_agent=lambda: build_human_in_the_loop(model()),
            examples=(
                "Send an email to ana@example.com about the weekly report",
                "What is the weather in Paris? Then email it to bob@example.com",
            ),
        ),
        Feature(
            name="Subagents",
            description=(
                "A supervisor that delegates to a weather agent and an e-mail agent; their "
                f"steps appear at depth 1. {on_model}"
            ),
            build_agent=lambda: build_subagents(model()),
            examples=("What is the weather in Tokyo?",),
        ),
    ]
