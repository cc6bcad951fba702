// Usage: the balance, spend by day (a bar chart), by model and by source, and the documents
// that `rag_search` reads.
import { busy, errorBox, h, money, show, when } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";

export async function usagePage({ api, main, refreshAccount }) {
  const to = new Date();
  const from = new Date(to.getTime() - 29 * 86400_000);
  const day = (date) => date.toISOString().slice(0, 10);
  show(main, h("h1", {}, "Usage"), busy("Loading usage…"));
  const [account, usage] = await Promise.all([refreshAccount(), api.get("/v1/usage", { from: day(from), to: day(to) })]);
  const documents = h("section", { class: "card" });
  const files = h("section", { class: "card" });
  show(
    main,
    h("h1", {}, "Usage"),
    h(
      "div",
      { class: "figures" },
      figure("Balance", money(account.balance_rupiah), "balance"),
      figure("Held for calls in flight", money(account.held_rupiah), "held"),
      figure("Available", money(account.available_rupiah), "available"),
      figure(`Spent ${day(from)} – ${day(to)}`, money(usage.total_rupiah), "spent"),
    ),
    h("section", { class: "card" }, h("h2", {}, "Spend by day"), dayChart(usage.data, from, 30)),
    h("div", { class: "columns" }, breakdown("By model", usage.data, (l) => l.model_id), breakdown("By source", usage.data, (l) => l.source)),
    documents,
    files,
  );
  documentsSection(api, documents);
  filesSection(api, files);
}

async function filesSection(api, section) {
  show(section, h("h2", {}, "Files"), busy("Loading files…"));
  let files;
  try {
    files = await api.all("/v1/files");
  } catch (error) {
    return show(section, h("h2", {}, "Files"), errorBox(error));
  }
  const rows = files.map((file) => {
    const player = h("span");
    const play = async () => {
      show(player, busy("Loading…"));
      try {
        // The bytes need the key, which an <audio src> cannot send: fetched, then played.
        const response = await api.send("GET", `/v1/files/${encodeURIComponent(file.id)}/content`);
        const audio = h("audio", { controls: true, src: URL.createObjectURL(await response.blob()) });
        show(player, audio);
        audio.play().catch(() => {});
      } catch (error) {
        show(player, errorBox(error));
      }
    };
    const playable = file.content_type.startsWith("audio/");
    return h(
      "tr",
      { dataset: { fileId: file.id } },
      h("td", {}, file.filename),
      h("td", {}, file.purpose),
      h("td", {}, file.duration_seconds ? `${file.duration_seconds.toFixed(1)} s` : ""),
      h("td", {}, `${(file.size_bytes / 1024).toFixed(1)} KiB`),
      h("td", {}, when(file.created_at)),
      h("td", {}, playable ? h("button", { class: "link", onclick: play }, "Play") : null, player),
    );
  });
  show(
    section,
    h("h2", {}, "Files"),
    files.length
      ? h("table", { class: "list" }, h("thead", {}, h("tr", {}, ["File", "Made by", "Length", "Size", "Made", ""].map((t) => h("th", {}, t)))), h("tbody", {}, rows))
      : h("p", { class: "empty" }, "No files yet: agents with text_to_speech make them."),
  );
}

function figure(label, value, id) {
  return h("div", { class: "figure" }, h("span", {}, label), h("strong", { id: `usage-${id}` }, value));
}

function dayChart(lines, from, days) {
  const totals = new Map();
  for (const line of lines) totals.set(line.day, (totals.get(line.day) ?? 0) + Number(line.cost_rupiah));
  const series = Array.from({ length: days }, (_, i) => {
    const day = new Date(from.getTime() + i * 86400_000).toISOString().slice(0, 10);
    return { day, total: totals.get(day) ?? 0 };
  });
  const top = Math.max(...series.map((d) => d.total), 0);
  if (top === 0) return h("p", { class: "empty" }, "Nothing spent in these 30 days.");
  const width = 600;
  const height = 160;
  const bar = width / days;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height + 20}`);
  svg.setAttribute("class", "chart");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "Spend per day over the last 30 days");
  series.forEach(({ day, total }, i) => {
    if (total <= 0) return;
    const tall = Math.max((total / top) * height, 2);
    const rect = document.createElementNS(SVG, "rect");
    for (const [name, value] of Object.entries({ x: i * bar + 2, y: height - tall, width: bar - 4, height: tall, class: "bar" })) rect.setAttribute(name, value);
    const title = document.createElementNS(SVG, "title");
    title.textContent = `${day}: ${money(total)}`;
    rect.append(title);
    svg.append(rect);
  });
  for (const [i, anchor] of [[0, "start"], [days - 1, "end"]]) {
    const text = document.createElementNS(SVG, "text");
    for (const [name, value] of Object.entries({ x: anchor === "start" ? 0 : width, y: height + 16, "text-anchor": anchor, class: "axis" })) text.setAttribute(name, value);
    text.textContent = series[i].day;
    svg.append(text);
  }
  return svg;
}

function breakdown(title, lines, keyOf) {
  const groups = new Map();
  for (const line of lines) {
    const group = groups.get(keyOf(line)) ?? { calls: 0, tokens: 0, cost: 0 };
    group.calls += line.calls;
    group.tokens += line.input_tokens + line.output_tokens;
    group.cost += Number(line.cost_rupiah);
    groups.set(keyOf(line), group);
  }
  const rows = [...groups].sort((a, b) => b[1].cost - a[1].cost);
  return h(
    "section",
    { class: "card" },
    h("h2", {}, title),
    rows.length
      ? h(
          "table",
          { class: "list" },
          h("thead", {}, h("tr", {}, ["", "Calls", "Tokens", "Cost"].map((t) => h("th", {}, t)))),
          h("tbody", {}, rows.map(([key, g]) => h("tr", {}, h("td", {}, key), h("td", {}, String(g.calls)), h("td", {}, String(g.tokens)), h("td", {}, money(g.cost))))),
        )
      : h("p", { class: "empty" }, "No calls yet."),
  );
}

async function documentsSection(api, section) {
  const list = h("div", {}, busy("Loading documents…"));
  const outcome = h("div", { "aria-live": "polite" });
  const file = h("input", { type: "file", name: "file", accept: ".txt,.md,.pdf,text/plain,text/markdown,application/pdf", required: true });
  const title = h("input", { name: "title", placeholder: "Title (defaults to the file name)" });
  const refresh = async () => {
    try {
      const documents = await api.all("/v1/documents");
      show(list, documents.length ? documentTable(api, documents, refresh, outcome) : h("p", { class: "empty" }, "No documents yet."));
    } catch (error) {
      show(list, errorBox(error));
    }
  };
  const upload = async (event) => {
    event.preventDefault();
    const form = new FormData();
    form.append("file", file.files[0]);
    if (title.value.trim()) form.append("title", title.value.trim());
    show(outcome, busy("Uploading and indexing…"));
    try {
      const response = await api.send("POST", "/v1/documents", { form });
      const document = await response.json();
      show(outcome, h("p", { class: "ok", role: "status" }, `Added “${document.title}” (${document.chunk_count} chunks): agents with rag_search can find it now.`));
      file.value = "";
      title.value = "";
      refresh();
    } catch (error) {
      show(outcome, errorBox(error));
    }
  };
  show(
    section,
    h("h2", {}, "Documents for rag_search"),
    h("form", { class: "upload", onsubmit: upload }, file, title, h("button", { type: "submit", class: "primary" }, "Upload")),
    outcome,
    list,
  );
  refresh();
}

function documentTable(api, documents, refresh, outcome) {
  const remove = async (document) => {
    if (!confirm(`Delete “${document.title}”?`)) return;
    try {
      await api.request("DELETE", `/v1/documents/${encodeURIComponent(document.id)}`);
      refresh();
    } catch (error) {
      show(outcome, errorBox(error));
    }
  };
  return h(
    "table",
    { class: "list" },
    h("thead", {}, h("tr", {}, ["Title", "File", "Characters", "Chunks", "Added", ""].map((t) => h("th", {}, t)))),
    h(
      "tbody",
      {},
      documents.map((d) =>
        h(
          "tr",
          {},
          h("td", {}, d.title),
          h("td", {}, d.filename ?? ""),
          h("td", {}, String(d.characters)),
          h("td", {}, String(d.chunk_count)),
          h("td", {}, when(d.created_at)),
          h("td", {}, h("button", { class: "link danger", onclick: () => remove(d) }, "Delete")),
        ),
      ),
    ),
  );
}
