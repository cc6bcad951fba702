// Building the page from data without ever parsing data as HTML.

/** An element: `h("button", {class: "primary", onclick: f}, "Save")`. Strings become text. */
export function h(tag, props = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2).toLowerCase(), value);
    else if (name === "class") element.className = value;
    else if (name === "dataset") Object.assign(element.dataset, value);
    else if (name === "value" || name === "checked" || name === "disabled") element[name] = value;
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

export function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

/** Replace what `element` shows. */
export function show(element, ...children) {
  element.replaceChildren();
  return append(element, children);
}

/** A readable error box (never raw JSON): the message, then one line per field. */
export function errorBox(error) {
  const message = error?.message ?? String(error);
  // The envelope's message often lists the fields already: then the list would repeat it.
  const listed = error?.fields?.length && !error.fields.every((f) => message.includes(f));
  const lines = listed ? h("ul", {}, error.fields.map((f) => h("li", {}, f))) : null;
  return h("div", { class: "error", role: "alert" }, h("p", {}, message), lines);
}

export function busy(text = "Working…") {
  return h("p", { class: "busy", role: "status" }, h("span", { class: "spinner" }), text);
}

export function pretty(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value, null, 2);
}

const rupiah = new Intl.NumberFormat("id-ID", { style: "currency", currency: "IDR", maximumFractionDigits: 4 });

export function money(amount) {
  return rupiah.format(Number(amount ?? 0));
}

export function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}
