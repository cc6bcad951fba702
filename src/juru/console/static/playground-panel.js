// The playground panel: the console's Playground tab and the documentation's Playground page.
// `mountPlayground(root, {baseUrl})` draws it into `root` and calls `${baseUrl}/playground/*`
// (no API key: the playground is for trying features, and is off unless PLAYGROUND_ENABLED).
import { errorOf, unreachable } from "./api.js";
import { busy, errorBox, h, pretty, show } from "./dom.js";
import { readEvents } from "./sse.js";

export function mountPlayground(root, { baseUrl = "" } = {}) {
  const panel = new PlaygroundPanel(root, baseUrl.replace(/\/$/, ""));
  panel.load();
  return panel;
}

class PlaygroundPanel {
  constructor(root, baseUrl) {
    this.root = root;
    this.baseUrl = baseUrl;
    this.feature = null;
    this.threadId = null;
    this.working = false;
    root.classList.add("juru-playground");
  }

  async load() {
    show(this.root, busy("Loading the features…"));
    let features;
    try {
      const response = await this.call("GET", "/playground/features");
      features = await response.json();
    } catch (error) {
      return show(this.root, errorBox(error), h("button", { onclick: () => this.load() }, "Try again"));
    }
    this.features = features;
    this.picker = h(
      "select",
      { id: "feature", "aria-label": "Feature", onchange: () => this.choose(this.picker.value) },
      features.map((f) => h("option", { value: f.name }, f.name)),
    );
    this.about = h("div", { class: "feature-about" });
    this.timeline = h("ol", { class: "timeline", "aria-live": "polite" });
    this.input = h("textarea", { rows: 2, id: "playground-message", placeholder: "Message the feature…" });
    this.sendButton = h("button", { type: "submit", class: "primary" }, "Send");
    this.threadLabel = h("small", { class: "id" });
    const form = h(
      "form",
      { class: "composer", onsubmit: (event) => (event.preventDefault(), this.send(this.input.value)) },
      this.input,
      this.sendButton,
    );
    show(
      this.root,
      h(
        "div",
        { class: "title-row" },
        h("label", { class: "field inline" }, h("span", {}, "Feature"), this.picker),
        h("span", {}, this.threadLabel, " ", h("button", { type: "button", onclick: () => this.newConversation() }, "New conversation")),
      ),
      this.about,
      this.timeline,
      form,
    );
    this.choose(features[0]?.name);
  }

  choose(name) {
    this.feature = this.features.find((f) => f.name === name) ?? null;
    this.newConversation();
    if (!this.feature) return show(this.about, h("p", { class: "empty" }, "No features are registered."));
    show(
      this.about,
      h("p", {}, this.feature.description),
      h("div", { class: "examples" }, this.feature.examples.map((example) => h("button", { type: "button", class: "example", onclick: () => this.send(example) }, example))),
    );
  }

  newConversation() {
    this.threadId = null;
    this.threadLabel.textContent = "new conversation";
    show(this.timeline);
  }

  async call(method, path, body) {
    let response;
    try {
      response = await fetch(this.baseUrl + path, {
        method,
        headers: body === undefined ? {} : { "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch {
      throw unreachable(this.baseUrl);
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  }

  async send(message) {
    if (!message.trim() || this.working || !this.feature) return;
    this.input.value = "";
    const turn = this.startTurn(h("p", { class: "user" }, h("span", { class: "role" }, "you"), message));
    await this.stream(turn, "/playground/messages/stream", { feature: this.feature.name, message, thread_id: this.threadId });
  }

  /** Resume the paused turn; the form that answered it is frozen unless the answer failed. */
  async resume(form, value, summary) {
    form.inert = true;
    form.classList.add("answered");
    const turn = this.startTurn(h("p", { class: "user" }, h("span", { class: "role" }, "review"), summary));
    const answered = await this.stream(turn, "/playground/resume/stream", { feature: this.feature.name, thread_id: this.threadId, value });
    if (!answered) {
      form.inert = false;
      form.classList.remove("answered");
    }
  }

  startTurn(header) {
    const steps = h("ol", { class: "steps" });
    const writing = h("div", { class: "writing", hidden: true });
    const end = h("div", { class: "turn-end" }, busy("Running…"));
    const element = h("li", { class: "turn" }, header, steps, writing, end);
    this.timeline.append(element);
    element.scrollIntoView({ block: "nearest" });
    return { element, steps, writing, end };
  }

  /** Whether the server answered with a whole turn. */
  async stream(turn, path, body) {
    let answered = false;
    this.working = true;
    this.sendButton.disabled = true;
    try {
      const response = await this.call("POST", path, body);
      for await (const event of readEvents(response)) {
        if (event.type === "step") {
          turn.writing.hidden = true;
          turn.writing.textContent = "";
          turn.steps.append(stepView(event.data));
        } else if (event.type === "text") {
          turn.writing.hidden = false;
          turn.writing.append(event.data.text);
        } else if (event.type === "turn") {
          answered = true;
          this.finish(turn, event.data);
        }
        else if (event.type === "error") show(turn.end, errorBox({ message: event.data.detail }));
      }
    } catch (error) {
      show(turn.end, errorBox(error));
    } finally {
      this.working = false;
      this.sendButton.disabled = false;
    }
    return answered;
  }

  finish(turn, result) {
    this.threadId = result.thread_id;
    this.threadLabel.textContent = result.thread_id;
    turn.writing.hidden = true;
    const seconds = h("small", {}, `${result.seconds.toFixed(2)} s`);
    if (result.error) show(turn.end, errorBox({ message: `${result.error.type}: ${result.error.message}` }), seconds);
    else if (result.pending_review) show(turn.end, this.reviewForm(result.pending_review), seconds);
    else show(turn.end, h("div", { class: "answer" }, h("span", { class: "role" }, "answer"), result.answer ?? ""), seconds);
  }

  reviewForm(request) {
    if (!Array.isArray(request?.action_requests)) {
      // Some other interrupt(): its value is shown, and the answer is sent as typed (JSON or text).
      const box = h("textarea", { rows: 3, class: "code", "aria-label": "Resume value" });
      const submit = (event) => {
        event.preventDefault();
        let value = box.value;
        try {
          value = JSON.parse(box.value);
        } catch {
          // plain text is a value too
        }
        this.resume(event.target, value, box.value);
      };
      return h("form", { class: "review", onsubmit: submit }, h("h3", {}, "The feature waits for you"), h("pre", { class: "code" }, pretty(request)), box, h("button", { type: "submit", class: "primary" }, "Resume"));
    }
    const problem = h("div");
    const items = request.action_requests.map((action, index) => reviewItem(action, request.review_configs?.[index], index));
    const submit = (event) => {
      event.preventDefault();
      const decisions = [];
      for (const item of items) {
        const decision = item.decision();
        if (decision.problem) return show(problem, errorBox({ message: decision.problem }));
        decisions.push(decision.value);
      }
      this.resume(event.target, { decisions }, decisions.map((d) => d.type).join(", "));
    };
    return h(
      "form",
      { class: "review", onsubmit: submit },
      h("h3", {}, "Review the tool calls"),
      items.map((item) => item.element),
      h("button", { type: "submit", class: "primary submit-review" }, "Submit review"),
      problem,
    );
  }
}

function reviewItem(action, config, index) {
  const allowed = config?.allowed_decisions ?? ["approve", "edit", "reject"];
  const group = `decision-${index}-${Math.random().toString(36).slice(2, 8)}`;
  const radios = allowed.map((type, i) => h("label", { class: "check" }, h("input", { type: "radio", name: group, value: type, checked: i === 0 }), type));
  const args = h("textarea", { rows: 6, class: "code", "aria-label": `Arguments of ${action.name}`, value: JSON.stringify(action.args ?? {}, null, 2) });
  const reason = h("input", { placeholder: "Why (sent to the model)", "aria-label": "Reject message" });
  const chosen = () => radios.map((l) => l.querySelector("input")).find((r) => r.checked)?.value;
  const element = h(
    "fieldset",
    { class: "review-item" },
    h("legend", {}, action.name),
    action.description ? h("p", { class: "hint" }, action.description) : null,
    h("div", { class: "choices" }, radios),
    h("label", { class: "field" }, h("span", {}, "Arguments (edit them to change the call)"), args),
    h("label", { class: "field" }, h("span", {}, "Message for a rejection"), reason),
  );
  const decision = () => {
    const type = chosen();
    if (type === "approve") return { value: { type } };
    if (type === "reject") return { value: reason.value.trim() ? { type, message: reason.value.trim() } : { type } };
    try {
      const edited = JSON.parse(args.value);
      if (edited === null || typeof edited !== "object" || Array.isArray(edited)) throw new Error("the arguments must be a JSON object");
      return { value: { type, edited_action: { name: action.name, args: edited } } };
    } catch (error) {
      return { problem: `The arguments of ${action.name} are not a JSON object: ${error.message}` };
    }
  };
  return { element, decision };
}

function stepView(step) {
  return h(
    "li",
    { class: `step depth-${Math.min(step.depth, 3)}`, dataset: { node: step.node } },
    h("span", { class: "node" }, step.node, step.depth ? h("small", {}, ` depth ${step.depth}`) : null),
    h("ul", { class: "events" }, step.events.map(eventView)),
  );
}

function eventView(event) {
  if (event.type === "tool_call") return h("li", { class: "event call" }, h("span", { class: "tag" }, "tool call"), h("strong", {}, event.name), h("pre", { class: "code" }, pretty(event.args ?? {})));
  if (event.type === "tool_result")
    return h("li", { class: `event result${event.failed ? " failed" : ""}` }, h("span", { class: "tag" }, event.failed ? "tool error" : "tool result"), h("strong", {}, event.name ?? ""), h("pre", { class: "code" }, event.content ?? ""));
  return h("li", { class: "event text" }, h("span", { class: "tag" }, event.type), event.content ?? "");
}
