// Agents: the list, and one agent's form (create, edit, delete) with its threads.
import { busy, errorBox, h, show, when } from "./dom.js";

const BUILTIN_TOOLS = ["rag_search", "text_to_speech"]; // the built-ins the server runs today
const EXAMPLE_TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather for a city.",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];

export async function agentsPage({ api, main }) {
  show(main, h("h1", {}, "Agents"), busy("Loading agents…"));
  const agents = await api.all("/v1/agents");
  const rows = agents.map((agent) =>
    h(
      "tr",
      {},
      h("td", {}, h("a", { href: `#/agents/${encodeURIComponent(agent.id)}` }, agent.name)),
      h("td", {}, agent.model_id),
      h("td", {}, String(agent.tools.length + agent.builtin_tools.length)),
      h("td", {}, String(agent.max_steps)),
      h("td", {}, when(agent.updated_at)),
    ),
  );
  show(
    main,
    h("div", { class: "title-row" }, h("h1", {}, "Agents"), h("a", { href: "#/agents/new", class: "button primary" }, "New agent")),
    agents.length
      ? h(
          "table",
          { class: "list" },
          h("thead", {}, h("tr", {}, ["Name", "Model", "Tools", "Max steps", "Updated"].map((t) => h("th", {}, t)))),
          h("tbody", {}, rows),
        )
      : h("p", { class: "empty" }, "No agents yet. Create one to start a thread."),
  );
}

export async function agentPage({ api, main }, agentId) {
  show(main, busy("Loading…"));
  const [models, agent] = await Promise.all([
    api.get("/v1/models"),
    agentId ? api.get(`/v1/agents/${encodeURIComponent(agentId)}`) : null,
  ]);
  const form = agentForm(api, models.data.filter((m) => m.agents), agent);
  show(
    main,
    h("p", {}, h("a", { href: "#/agents" }, "← Agents")),
    h("h1", {}, agent ? agent.name : "New agent"),
    h("div", { class: agent ? "columns" : "" }, form, agent ? threadsSection(api, agent) : null),
  );
}

function agentForm(api, models, agent) {
  const field = (label, control, help = null) =>
    h("label", { class: "field" }, h("span", {}, label), control, help ? h("small", {}, help) : null);
  const name = h("input", { name: "name", value: agent?.name ?? "", required: true, maxlength: 200 });
  const model = h(
    "select",
    { name: "model_id" },
    models.map((m) => h("option", { value: m.id, selected: (agent?.model_id ?? "juru/demo") === m.id }, `${m.label} (${m.id})`)),
  );
  const prompt = h("textarea", { name: "system_prompt", rows: 4, value: agent?.system_prompt ?? "" });
  const tools = h("textarea", {
    name: "tools",
    rows: 10,
    class: "code",
    spellcheck: "false",
    value: JSON.stringify(agent ? agent.tools : EXAMPLE_TOOLS, null, 2),
  });
  const builtins = BUILTIN_TOOLS.map((tool) =>
    h("label", { class: "check" }, h("input", { type: "checkbox", value: tool, checked: agent?.builtin_tools.includes(tool) }), tool),
  );
  const maxSteps = h("input", { name: "max_steps", type: "number", min: 1, value: agent?.max_steps ?? 20 });
  const outcome = h("div", { "aria-live": "polite" });

  const submit = async (event) => {
    event.preventDefault();
    let toolList;
    try {
      toolList = JSON.parse(tools.value || "[]");
    } catch (error) {
      return show(outcome, errorBox({ message: "The client tools are not valid JSON.", fields: [`tools: ${error.message}`] }));
    }
    const body = {
      name: name.value,
      model_id: model.value,
      system_prompt: prompt.value,
      tools: toolList,
      builtin_tools: builtins.map((l) => l.querySelector("input")).filter((c) => c.checked).map((c) => c.value),
      max_steps: Number(maxSteps.value),
    };
    show(outcome, busy("Saving…"));
    try {
      const saved = agent
        ? await api.request("PATCH", `/v1/agents/${encodeURIComponent(agent.id)}`, { json: body })
        : await api.post("/v1/agents", body);
      if (agent) show(outcome, h("p", { class: "ok", role: "status" }, "Saved."));
      else location.hash = `#/agents/${encodeURIComponent(saved.id)}`;
    } catch (error) {
      show(outcome, errorBox(error));
    }
  };

  const remove = async () => {
    if (!confirm(`Delete the agent “${agent.name}”? Its active runs are cancelled.`)) return;
    show(outcome, busy("Deleting…"));
    try {
      await api.request("DELETE", `/v1/agents/${encodeURIComponent(agent.id)}`);
      location.hash = "#/agents";
    } catch (error) {
      show(outcome, errorBox(error));
    }
  };

  return h(
    "form",
    { class: "card agent-form", onsubmit: submit },
    field("Name", name),
    field("Model", model),
    field("System prompt", prompt),
    field("Client tools (JSON)", tools, "A list of {type: \"function\", function: {name, description, parameters}}; your program (or you, in a thread) answers their calls."),
    h("fieldset", {}, h("legend", {}, "Built-in tools"), builtins),
    field("Max steps", maxSteps),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit", class: "primary" }, agent ? "Save" : "Create agent"),
      agent ? h("button", { type: "button", class: "danger", onclick: remove }, "Delete") : null,
    ),
    outcome,
  );
}

function threadsSection(api, agent) {
  const list = h("div", {}, busy("Loading threads…"));
  const outcome = h("div");
  const path = `/v1/agents/${encodeURIComponent(agent.id)}/threads`;
  const newThread = async () => {
    try {
      const thread = await api.post(path, {});
      location.hash = `#/threads/${encodeURIComponent(thread.id)}`;
    } catch (error) {
      show(outcome, errorBox(error));
    }
  };
  api
    .all(path)
    .then((threads) =>
      show(
        list,
        threads.length
          ? h(
              "ul",
              { class: "threads" },
              threads
                .reverse()
                .map((t) => h("li", {}, h("a", { href: `#/threads/${encodeURIComponent(t.id)}` }, t.title || t.id), " ", h("small", {}, when(t.created_at)))),
            )
          : h("p", { class: "empty" }, "No threads yet."),
      ),
    )
    .catch((error) => show(list, errorBox(error)));
  return h(
    "section",
    { class: "card" },
    h("div", { class: "title-row" }, h("h2", {}, "Threads"), h("button", { class: "primary", onclick: newThread }, "New thread")),
    outcome,
    list,
  );
}
