// The playground panel: the console's Playground tab and the documentation's Playground page.
// mountPlayground(root, {baseUrl}) draws it into `root` and calls `${baseUrl}/playground/*`.
export function mountPlayground(root, { baseUrl = "" } = {}) {
  root.textContent = `Playground panel (server ${baseUrl || "this origin"}): not built yet.`;
}
