// One thread: its transcript, a composer, and the live run (streamed, paused for tool outputs,
// cancelled).
import { busy, errorBox, h, money, pretty, show, when } from "./dom.js";

const ACTIVE = new Set(["queued", "running", "requires_action"]);
const TERMINAL = new Set(["succeeded", "failed", "expired", "cancelled"]);

export async function threadPage(context, threadId) {
  const { api, main } = context;
  show(main, busy("Loading the thread…"));
  const thread = await api.get(`/v1/threads/${encodeURIComponent(threadId)}`);
  const [agent, messages, runs] = await Promise.all([
    api.get(`/v1/agents/${encodeURIComponent(thread.agent_id)}`),
    api.all(`/v1/threads/${encodeURIComponent(threadId)}/messages`),
    api.all(`/v1/threads/${encodeURIComponent(threadId)}/runs`),
  ]);
  const view = new ThreadView(context, thread, agent);
  for (const message of messages) view.addMessage(message);
  const latest = runs[runs.length - 1];
  if (latest) view.showRun(latest);
  if (latest && ACTIVE.has(latest.status)) view.follow(latest.id);
  return () => view.leave();
}

class ThreadView {
  constructor({ api, main, refreshAccount }, thread, agent) {
    this.api = api;
    this.refreshAccount = refreshAccount;
    this.thread = thread;
    this.messages = new Map(); // id -> element, so a replayed event does not show twice
    this.drafts = new Map(); // message id -> element with the text streamed so far
    this.follower = null;
    this.transcript = h("ol", { class: "transcript", "aria-live": "polite" });
    this.runBar = h("div", { class: "run-bar", hidden: true });
    this.pending = h("div", { class: "pending" });
    this.problem = h("div");
    this.input = h("textarea", { rows: 3, placeholder: `Message ${agent.name}…`, id: "composer" });
    this.sendButton = h("button", { type: "submit", class: "primary" }, "Send");
    const composer = h(
      "form",
      { class: "composer", onsubmit: (event) => (event.preventDefault(), this.send()) },
      this.input,
      this.sendButton,
    );
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) composer.requestSubmit();
    });
    show(
      main,
      h("p", {}, h("a", { href: `#/agents/${encodeURIComponent(agent.id)}` }, `← ${agent.name}`)),
      h("h1", {}, thread.title || "Thread", " ", h("small", { class: "id" }, thread.id)),
      this.transcript,
      this.runBar,
      this.pending,
      this.problem,
      composer,
    );
  }

  leave() {
    this.follower?.close();
  }

  async send() {
    const input = this.input.value.trim();
    if (!input) return;
    show(this.problem);
    this.sendButton.disabled = true;
    try {
      const run = await this.api.post(`/v1/threads/${encodeURIComponent(this.thread.id)}/runs`, { input });
      this.input.value = "";
      this.showRun(run);
      this.follow(run.id);
    } catch (error) {
      show(this.problem, errorBox(error));
      this.sendButton.disabled = false;
    }
  }

  follow(runId) {
    this.follower?.close();
    this.sendButton.disabled = true;
    this.follower = new RunFollower(this.api, runId, {
      "run.status": (run) => this.showRun(run),
      // Events with a `depth` are a child run's (an agent this one called): shown nested under
      // the call, not counted as this thread's steps.
      "message.completed": (message) => this.addMessage(message),
      "message.delta": ({ message_id, delta }) => this.addDelta(message_id, delta),
      "step.completed": ({ step_count, cost_rupiah, depth }) =>
        depth || this.showStep(step_count, cost_rupiah),
      connection: (state) => this.runBar.classList.toggle("reconnecting", state !== "open"),
      failure: (error) => {
        show(this.problem, errorBox(error));
        this.sendButton.disabled = false;
      },
    });
    this.follower.open();
  }

  addMessage(message) {
    if (this.messages.has(message.id)) return;
    const element = messageView(message);
    const draft = this.drafts.get(message.id);
    if (draft) {
      draft.replaceWith(element);
      this.drafts.delete(message.id);
    } else {
      // A client tool's output is logged with the step that read it, after the pieces of that
      // step's answer: it goes before the answer still being written.
      const firstDraft = this.drafts.values().next().value;
      if (firstDraft) firstDraft.before(element);
      else this.transcript.append(element);
    }
    this.messages.set(message.id, element);
    element.scrollIntoView({ block: "nearest" });
  }

  addDelta(messageId, delta) {
    if (this.messages.has(messageId)) return;
    let draft = this.drafts.get(messageId);
    if (!draft) {
      draft = h("li", { class: "message assistant streaming" }, h("span", { class: "role" }, "assistant"), h("div", { class: "content" }));
      this.drafts.set(messageId, draft);
      this.transcript.append(draft);
    }
    draft.querySelector(".content").append(delta);
  }

  showRun(run) {
    this.run = run;
    this.runBar.hidden = false;
    const cancel = ACTIVE.has(run.status)
      ? h("button", { class: "danger", id: "cancel-run", onclick: () => this.cancel(run.id) }, "Cancel run")
      : null;
    show(
      this.runBar,
      h("span", { class: `status ${run.status}`, id: "run-status" }, run.status.replace("_", " ")),
      h("span", { id: "run-steps" }, `step ${run.step_count} of ${run.max_steps}`),
      h("span", { id: "run-cost" }, money(run.cost_rupiah)),
      run.error ? h("span", { class: "run-error" }, run.error) : null,
      cancel,
    );
    show(this.pending, run.status === "requires_action" ? this.toolOutputsForm(run) : null);
    if (TERMINAL.has(run.status)) {
      this.stopDrafts(run.status);
      this.sendButton.disabled = false;
      this.refreshAccount().catch(() => {});
    }
  }

  /** Text that was still being written when the run ended is kept, marked as cut off. */
  stopDrafts(status) {
    for (const draft of this.drafts.values()) {
      draft.classList.replace("streaming", "cut-off");
      draft.append(h("small", { class: "hint" }, `(the run ${status.replace("_", " ")} while this was written)`));
    }
    this.drafts.clear();
  }

  showStep(stepCount, cost) {
    if (!this.run) return;
    this.showRun({ ...this.run, step_count: stepCount, cost_rupiah: cost });
  }

  async cancel(runId) {
    try {
      this.showRun(await this.api.post(`/v1/runs/${encodeURIComponent(runId)}/cancel`, {}));
    } catch (error) {
      show(this.problem, errorBox(error));
    }
  }

  toolOutputsForm(run) {
    const outcome = h("div");
    const outputs = run.pending_tool_calls.map((call) => ({
      call,
      box: h("textarea", { rows: 2, class: "code", "aria-label": `Output of ${call.name}`, dataset: { toolCall: call.id } }),
    }));
    const submit = async (event) => {
      event.preventDefault();
      show(outcome, busy("Sending the outputs…"));
      const body = { outputs: outputs.map(({ call, box }) => ({ tool_call_id: call.id, output: box.value })) };
      try {
        this.showRun(await this.api.post(`/v1/runs/${encodeURIComponent(run.id)}/tool_outputs`, body));
      } catch (error) {
        show(outcome, errorBox(error));
      }
    };
    return h(
      "form",
      { class: "card tool-outputs", onsubmit: submit },
      h("h2", {}, "The run waits for your tools"),
      outputs.map(({ call, box }) =>
        h(
          "div",
          { class: "tool-call" },
          h("p", {}, h("strong", {}, call.name), " ", h("small", { class: "id" }, call.id)),
          h("pre", { class: "code" }, pretty(call.arguments)),
          h("label", {}, "Output", box),
        ),
      ),
      h("button", { type: "submit", class: "primary", id: "submit-outputs" }, "Submit outputs"),
      outcome,
    );
  }
}

function messageView(message) {
  const calls = (message.tool_calls ?? []).map((call) =>
    h("div", { class: "tool-call" }, h("span", { class: "tag" }, "tool call"), h("strong", {}, call.name), h("pre", { class: "code" }, pretty(call.arguments))),
  );
  const label = message.role === "tool" ? `tool result · ${message.name ?? ""}` : message.role;
  // A message of a child run (an agent this thread's agent called) is indented by its depth.
  const depth = Math.min(message.depth ?? 0, 3);
  const child = depth ? h("span", { class: "tag child-run" }, `called agent · depth ${message.depth}`) : null;
  return h(
    "li",
    { class: `message ${message.role}${depth ? ` child depth-${depth}` : ""}`, dataset: { messageId: message.id } },
    h("span", { class: "role" }, child, label, " ", h("small", {}, when(message.created_at))),
    message.content ? h(message.role === "tool" ? "pre" : "div", { class: "content" }, message.content) : null,
    calls,
  );
}

/** A run's event stream in an EventSource, opened with a stream token (EventSource cannot
 * send an Authorization header). The browser reconnects by itself with `Last-Event-ID`; when
 * it gives up (an expired token is 401), a new token resumes after the last event seen. */
class RunFollower {
  constructor(api, runId, handlers) {
    this.api = api;
    this.runId = runId;
    this.handlers = handlers;
    this.lastId = null;
    this.ended = false;
    this.source = null;
    this.reopened = 0; // new tokens asked for in a row without an event in between
  }

  async open() {
    let ticket;
    try {
      ticket = await this.api.post(`/v1/runs/${encodeURIComponent(this.runId)}/stream_token`, {});
    } catch (error) {
      return this.handlers.failure(error);
    }
    if (this.ended) return;
    const path = `/v1/runs/${encodeURIComponent(this.runId)}/events`;
    const source = new EventSource(this.api.url(path, { token: ticket.token, after: this.lastId }));
    this.source = source;
    for (const type of ["run.status", "message.completed", "message.delta", "step.completed"]) {
      source.addEventListener(type, (event) => {
        this.reopened = 0;
        if (event.lastEventId && type !== "message.delta") this.lastId = event.lastEventId;
        const data = JSON.parse(event.data);
        this.handlers[type](data);
        if (type === "run.status" && TERMINAL.has(data.status)) this.close();
      });
    }
    source.onopen = () => this.handlers.connection("open");
    source.onerror = () => {
      if (this.ended) return;
      this.handlers.connection("lost");
      if (source.readyState !== EventSource.CLOSED) return; // the browser reconnects itself
      // Refused (an expired token is 401): a new token, a few times; then say so.
      if (++this.reopened <= 3) this.open();
      else this.handlers.failure(new Error("The run's stream keeps failing: reload the page to try again."));
    };
  }

  close() {
    this.ended = true;
    this.source?.close();
  }
}
