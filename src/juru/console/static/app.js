// The console's shell: signing in, the header and the views behind `#/...` addresses.
import { Api, ApiError } from "./api.js";
import { agentPage, agentsPage } from "./agents.js";
import { errorBox, h, money, show } from "./dom.js";
import { mountPlayground } from "./playground-panel.js";
import { threadPage } from "./thread.js";
import { usagePage } from "./usage.js";

const KEY = "juru.apiKey"; // sessionStorage: the tab's own, gone when it closes
const root = document.getElementById("app");
let leaveView = () => {};

const ROUTES = [
  [/^#\/agents\/new$/, (context) => agentPage(context, null)],
  [/^#\/agents\/([^/]+)$/, (context, id) => agentPage(context, id)],
  [/^#\/threads\/([^/]+)$/, (context, id) => threadPage(context, id)],
  [/^#\/playground$/, (context) => playgroundPage(context)],
  [/^#\/usage$/, (context) => usagePage(context)],
  [/^/, (context) => agentsPage(context)],
];

async function start() {
  const key = sessionStorage.getItem(KEY);
  if (!key) return signIn();
  const api = new Api("", key);
  let account;
  try {
    account = await api.get("/v1/account");
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      sessionStorage.removeItem(KEY);
      return signIn("That key is not valid any more: sign in again.");
    }
    return show(root, h("main", {}, errorBox(error), h("button", { onclick: start }, "Try again")));
  }
  const main = h("main", { id: "view" });
  show(root, header(account), main);
  const route = () => {
    leaveView();
    leaveView = () => {};
    // Each view draws into an element of its own: a slow view the user has left draws into
    // a detached element, never over the next one.
    const view = h("div");
    show(main, view);
    const context = { api, main: view, account, refreshAccount: () => refreshBalance(api) };
    for (const [pattern, draw] of ROUTES) {
      const match = location.hash.match(pattern);
      if (match) {
        markTab();
        Promise.resolve(draw(context, ...match.slice(1).map(decodeURIComponent)))
          .then((leave) => {
            if (typeof leave !== "function") return;
            if (main.firstChild === view) leaveView = leave;
            else leave(); // left before it was ready
          })
          .catch((error) => show(view, errorBox(error)));
        return;
      }
    }
  };
  window.onhashchange = route;
  route();
}

function header(account) {
  const tab = (hash, label) => h("a", { href: hash, class: "tab", dataset: { tab: hash } }, label);
  return h(
    "header",
    { class: "top" },
    h("strong", { class: "brand" }, "Juru"),
    h("nav", {}, tab("#/agents", "Agents"), tab("#/playground", "Playground"), tab("#/usage", "Usage")),
    h(
      "span",
      { class: "who" },
      h("span", {}, account.name),
      h("span", { id: "balance", title: "available balance" }, money(account.available_rupiah)),
      h("button", { class: "link", onclick: signOut }, "Sign out"),
    ),
  );
}

function markTab() {
  const current = location.hash.startsWith("#/playground")
    ? "#/playground"
    : location.hash.startsWith("#/usage")
      ? "#/usage"
      : "#/agents";
  for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("current", tab.dataset.tab === current);
}

async function refreshBalance(api) {
  const account = await api.get("/v1/account");
  const balance = document.getElementById("balance");
  if (balance) balance.textContent = money(account.available_rupiah);
  return account;
}

function playgroundPage(context) {
  const panel = h("section", { class: "panel" });
  show(context.main, h("h1", {}, "Playground"), panel);
  mountPlayground(panel, { baseUrl: "" });
}

function signOut() {
  sessionStorage.removeItem(KEY);
  location.hash = "";
  signIn();
}

async function signIn(notice = null) {
  const input = h("input", { type: "password", id: "api-key", autocomplete: "off", placeholder: "juru_live_…", required: true });
  const problem = h("div", { "aria-live": "polite" }, notice ? h("p", { class: "notice" }, notice) : null);
  const local = h("div");
  const use = async (key) => {
    show(problem, h("p", { class: "busy" }, "Checking the key…"));
    try {
      await new Api("", key).get("/v1/account");
    } catch (error) {
      return show(problem, errorBox(error));
    }
    sessionStorage.setItem(KEY, key);
    start();
  };
  const form = h(
    "form",
    { class: "card sign-in", onsubmit: (event) => (event.preventDefault(), use(input.value.trim())) },
    h("h1", {}, "Sign in to Juru"),
    h("label", { for: "api-key" }, "API key"),
    input,
    h("button", { type: "submit", class: "primary" }, "Sign in"),
    local,
    problem,
    h("p", { class: "hint" }, "The key stays in this tab (sessionStorage) and is sent only to this server."),
  );
  show(root, h("main", { class: "centered" }, form));
  input.focus();
  const offered = await localKey();
  if (offered) {
    show(
      local,
      h("p", { class: "hint" }, "This machine's SQLite install has a local key."),
      h("button", { type: "button", id: "use-local-key", onclick: () => use(offered) }, "Use the local key"),
    );
  }
}

async function localKey() {
  try {
    const response = await fetch("/console/local-key", { cache: "no-store" });
    return response.ok ? (await response.json()).api_key : null;
  } catch {
    return null;
  }
}

start();
