// Calls to the Juru server, and its errors as readable messages.

export class ApiError extends Error {
  constructor(status, code, message, fields = []) {
    super(message);
    this.status = status;
    this.code = code;
    this.fields = fields;
  }
}

/** The error a failed response carries, in any of the server's shapes: the `/v1` envelope
 * `{"error": {code, message, fields}}`, the playground's `{"detail": text}` and its 422 list. */
export async function errorOf(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not JSON: the status line is all there is
  }
  const retry = response.headers.get("Retry-After");
  const later = response.status === 429 && retry ? ` Try again in ${retry} s.` : "";
  if (body?.error?.message) {
    const fields = (body.error.fields ?? []).map((f) => `${f.path}: ${f.reason}`);
    return new ApiError(response.status, body.error.code, body.error.message + later, fields);
  }
  if (typeof body?.detail === "string") return new ApiError(response.status, "error", body.detail + later);
  if (Array.isArray(body?.detail)) {
    const fields = body.detail.map((d) => `${(d.loc ?? []).slice(1).join(".") || "body"}: ${d.msg}`);
    return new ApiError(response.status, "invalid_request", "The request is not valid.", fields);
  }
  return new ApiError(response.status, "http_error", `The server answered ${response.status} ${response.statusText}.${later}`);
}

export function unreachable(baseUrl) {
  const where = baseUrl || location.origin;
  // A browser tells a refused CORS check and a server that is down apart to no one.
  const crossOrigin = new URL(where, location.href).origin !== location.origin;
  const cors = crossOrigin ? ` If it is, its PLAYGROUND_ORIGINS must allow this page's origin (${location.origin}).` : "";
  return new ApiError(0, "unreachable", `Cannot reach the Juru server at ${where}. Is it running?${cors}`);
}

export class Api {
  constructor(baseUrl = "", key = null) {
    this.baseUrl = baseUrl.replace(/\/$/, "");
    this.key = key;
  }

  url(path, query = {}) {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) if (value !== null && value !== undefined && value !== "") params.set(name, value);
    const search = params.toString();
    return `${this.baseUrl}${path}${search ? `?${search}` : ""}`;
  }

  /** The response of `method path`, or an ApiError: `json` is sent as JSON, `form` as is. */
  async send(method, path, { json, form, query, signal } = {}) {
    const headers = {};
    if (this.key) headers.Authorization = `Bearer ${this.key}`;
    let body;
    if (json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(json);
    } else if (form) body = form;
    let response;
    try {
      response = await fetch(this.url(path, query), { method, headers, body, signal });
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw unreachable(this.baseUrl);
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  }

  async request(method, path, options) {
    const response = await this.send(method, path, options);
    return response.status === 204 ? null : response.json();
  }

  get(path, query) {
    return this.request("GET", path, { query });
  }

  post(path, json) {
    return this.request("POST", path, { json });
  }

  /** Every item of a `/v1` list, following `has_more` / `next_cursor` pages. */
  async all(path, query = {}) {
    const items = [];
    let after = null;
    for (;;) {
      const page = await this.get(path, { ...query, limit: 100, after });
      items.push(...page.data);
      if (!page.has_more || !page.next_cursor) return items;
      after = page.next_cursor;
    }
  }
}
