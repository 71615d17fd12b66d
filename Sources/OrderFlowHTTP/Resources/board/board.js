// The counter board: orders in columns by state, one-tap advances, live through
// GET /v1/events, and the Lock Screen preview of the selected order (preview.js).
// Everything it shows comes from the /v1 API; the engine decides every advance.
import { renderPreview, humanize } from "/board/preview.js";

const board = document.getElementById("board");
const previewPanel = document.getElementById("preview");
const connection = document.getElementById("connection");
const announcer = document.getElementById("announcer");
const offline = document.getElementById("offline");
const signOutButton = document.getElementById("sign-out");

const workflows = new Map();   // "name@version" -> workflow (states, final_states, transitions)
const orders = new Map();      // id -> order
const activities = new Map();  // id -> [activity]
const attempts = new Map();    // id -> Map(device -> its newest push attempt)
const messages = new Map();    // id -> the engine's sentence after a refused advance
let selected = null;           // the previewed order's id
let openForm = null;           // {orderID, key}: the transition whose form is open

// Drop the one-time token from the address bar (and history): it is used up.
if (location.search) history.replaceState(null, "", "/board");

class Problem extends Error {
  constructor(status, body) {
    super(body?.detail ?? `the server answered ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json, application/problem+json", "X-OrderFlow-Board": "1" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method === "POST") headers["Idempotency-Key"] = crypto.randomUUID();
  let response;
  try {
    response = await fetch(path, { method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    throw new Problem(0, { detail: "the server cannot be reached; the board retries by itself" });
  }
  const answer = await response.json().catch(() => null);
  if (response.status === 401) location.reload();  // the session ended: the page says how to sign in
  if (!response.ok) throw new Problem(response.status, answer);
  return answer;
}

async function workflowOf(order) {
  const key = `${order.workflow}@${order.workflow_version}`;
  if (!workflows.has(key)) {
    const query = new URLSearchParams({ version: String(order.workflow_version) });
    workflows.set(key, await api(`/v1/workflows/${encodeURIComponent(order.workflow)}?${query}`));
  }
  return workflows.get(key);
}

// ---- Loading --------------------------------------------------------------------------

async function loadAll() {
  const loaded = [];
  let cursor = null;
  for (let page = 0; page < 10; page++) {
    const query = new URLSearchParams({ limit: "200" });
    if (cursor) query.set("cursor", cursor);
    const result = await api(`/v1/orders?${query}`);
    loaded.push(...result.orders);
    cursor = result.next_cursor;
    if (!cursor) break;
  }
  orders.clear();
  for (const order of loaded) if (!order.is_final || order.id === selected) orders.set(order.id, order);
  for (const order of orders.values()) await workflowOf(order);
  render();
  await Promise.all([...orders.keys()].map(refreshActivities));
}

async function refreshOrder(id) {
  try {
    const details = await api(`/v1/orders/${encodeURIComponent(id)}`);
    const before = orders.get(id);
    await workflowOf(details.order);
    orders.set(id, details.order);
    activities.set(id, details.activities);
    if (before && before.state !== details.order.state) {
      announce(`Order ${label(details.order)} moved to ${humanize(details.order.state)}.`);
      if (openForm?.orderID === id) openForm = null;
    }
    render();
  } catch (error) {
    if (error.status === 404) { orders.delete(id); render(); }
  }
  if (id === selected) await showPreview(id);
}

async function refreshActivities(id) {
  try {
    const [details, history] = await Promise.all([
      api(`/v1/orders/${encodeURIComponent(id)}`), api(`/v1/orders/${encodeURIComponent(id)}/history`)]);
    activities.set(id, details.activities);
    noteAttempts(id, history.deliveries);
    const card = board.querySelector(`[data-order="${CSS.escape(id)}"] .devices`);
    if (card) card.replaceWith(devicesLine(id));
  } catch { /* the next event retries */ }
}

// ---- Rendering ------------------------------------------------------------------------

function label(order) {
  const number = order.attributes?.orderNumber;
  return number ? `#${number}` : order.id;
}

function age(order) {
  const minutes = Math.max(0, Math.floor((Date.now() - Date.parse(order.created_at)) / 60000));
  if (minutes < 1) return "just now";
  if (minutes < 60) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) if (child !== null && child !== undefined) node.append(child);
  return node;
}

// Each device's newest push attempt: a device whose newest attempt failed on a live token
// (APNs answered 429 or 5xx, a rejected payload, retries given up) is "failing".
function noteAttempts(id, deliveries) {
  const newest = new Map();
  for (const delivery of deliveries) {
    const known = newest.get(delivery.device);
    if (!known || delivery.id > known.id) newest.set(delivery.device, delivery);
  }
  attempts.set(id, newest);
}

const failedOutcomes = { retry: "retrying", dead: "gave up", rejected: "rejected" };

function failure(id, activity) {
  const attempt = attempts.get(id)?.get(activity.device);
  if (activity.status === "gone" || !attempt || !(attempt.outcome in failedOutcomes)) return null;
  const answer = [attempt.status, attempt.reason].filter((part) => part !== undefined && part !== null).join(" ");
  return `failing: ${answer || "no answer"}, ${failedOutcomes[attempt.outcome]}`;
}

const deviceWords = {
  waiting: "waiting", starting: "started", active: "updating", ended: "ended",
  gone: "failing: token dead", alerts: "no Live Activity → alerts",
};

function devicesLine(id) {
  const list = activities.get(id) ?? [];
  if (list.length === 0) return element("p", { class: "devices" }, element("span", { class: "device none" }, "no device follows"));
  return element("p", { class: "devices" }, list.map((activity) => {
    const failed = failure(id, activity);
    const word = failed ?? (activity.app_state === "dismissed" ? "dismissed by the customer" : (deviceWords[activity.status] ?? activity.status));
    const failing = failed !== null || activity.status === "gone";
    return element("span", { class: `device ${failing ? "failing" : activity.status}`, "data-device": activity.device }, `${activity.device}: ${word}`);
  }));
}

function render() {
  // A live update redraws every card: what was typed into an open form, and the focus, stay.
  const focusKey = document.activeElement?.dataset?.focusKey;
  const draft = openForm ? [...board.querySelectorAll(`[data-order="${CSS.escape(openForm.orderID)}"] form [name]`)]
    .map((control) => [control.name, control.type === "checkbox" ? control.checked : control.value]) : [];
  const groups = new Map();
  for (const order of orders.values()) {
    if (!groups.has(order.workflow)) groups.set(order.workflow, []);
    groups.get(order.workflow).push(order);
  }
  board.replaceChildren();
  if (groups.size === 0) {
    board.append(element("p", { class: "empty" }, "No open orders. They appear here as soon as they are created."));
  }
  for (const [name, list] of [...groups].sort(([a], [b]) => a.localeCompare(b))) {
    const newest = [...workflows.values()].filter((w) => w.name === name).sort((a, b) => b.version - a.version)[0];
    const final = new Set(newest.final_states);
    const states = newest.states.filter((state) => !final.has(state) || list.some((order) => order.state === state));
    for (const order of list) if (!states.includes(order.state)) states.push(order.state);
    const section = element("section", { class: "workflow", "aria-label": `${humanize(name)} orders` },
      groups.size > 1 ? element("h2", {}, humanize(name)) : null);
    const columns = element("div", { class: "columns" });
    for (const state of states) {
      const inState = list.filter((order) => order.state === state)
        .sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at));
      const headingID = `column-${name}-${state}`;
      columns.append(element("section", { class: "column", "data-state": state, "aria-labelledby": headingID },
        element("h3", { id: headingID }, humanize(state), " ", element("span", { class: "count" }, String(inState.length))),
        inState.map(card)));
    }
    section.append(columns);
    board.append(section);
  }
  const form = openForm ? board.querySelector(`[data-order="${CSS.escape(openForm.orderID)}"] form`) : null;
  for (const [name, value] of form ? draft : []) {
    const control = form.elements.namedItem(name);
    if (!control) continue;
    if (control.type === "checkbox") control.checked = value; else control.value = value;
  }
  if (focusKey) board.querySelector(`[data-focus-key="${CSS.escape(focusKey)}"]`)?.focus();
}

function card(order) {
  const workflow = workflows.get(`${order.workflow}@${order.workflow_version}`);
  const steps = (workflow?.transitions ?? []).filter((transition) => transition.from === order.state);
  const message = messages.get(order.id);
  const node = element("article", { class: `card${order.id === selected ? " selected" : ""}`, "data-order": order.id },
    element("header", {},
      element("h4", {}, label(order)),
      element("span", { class: "age", title: order.created_at }, age(order))),
    order.attributes?.merchantName ? element("p", { class: "detail" }, String(order.attributes.merchantName)) : null,
    devicesLine(order.id),
    message ? element("p", { class: "message", role: "alert" }, message) : null,
    element("div", { class: "actions" },
      steps.map((transition) => stepButton(order, transition)),
      element("button", {
        type: "button", class: "secondary", "data-focus-key": `preview:${order.id}`,
        "aria-pressed": order.id === selected ? "true" : "false",
        onclick: () => select(order.id),
      }, "Preview")));
  const open = openForm?.orderID === order.id ? steps.find((transition) => key(transition) === openForm.key) : null;
  if (open) node.append(stepForm(order, open));
  return node;
}

const key = (transition) => `${transition.from}->${transition.to}`;
const isCancel = (transition) => transition.event === "cancel";

function stepButton(order, transition) {
  const needsForm = transition.inputs.length > 0 || isCancel(transition);
  return element("button", {
    type: "button", class: isCancel(transition) ? "danger" : "primary",
    "data-focus-key": `step:${order.id}:${key(transition)}`,
    "aria-expanded": needsForm ? String(openForm?.orderID === order.id && openForm.key === key(transition)) : null,
    onclick: () => {
      if (!needsForm) return advance(order, transition, {});
      openForm = openForm?.orderID === order.id && openForm.key === key(transition) ? null : { orderID: order.id, key: key(transition) };
      render();
      board.querySelector(`[data-order="${CSS.escape(order.id)}"] form input, [data-order="${CSS.escape(order.id)}"] form button`)?.focus();
    },
    "aria-label": isCancel(transition) ? `Cancel order ${label(order)}` : null,
  }, isCancel(transition) ? "Cancel…" : humanize(transition.to),
  transition.event && !isCancel(transition) ? element("span", { class: "event" }, transition.event) : null);
}

// A small form for the input a transition takes; for a cancel, the confirmation too.
function stepForm(order, transition) {
  const fields = transition.inputs.map((input) => {
    const id = `input-${order.id}-${input.name}`;
    const focusKey = `field:${order.id}:${input.name}`;
    const base = input.type.replace(/\?$/, "");
    let control;
    if (base === "date") {
      control = element("input", { id, name: input.name, type: "number", min: "0", max: "1440", inputmode: "numeric", required: input.required, "data-focus-key": focusKey });
      return element("label", { for: id }, `${humanize(input.name)} (minutes from now)${input.required ? "" : ", optional"}`, control);
    }
    if (base === "daterange") {
      control = element("input", { id, name: input.name, type: "text", pattern: "\\s*\\d+\\s*\\.\\.\\s*\\d+\\s*", placeholder: "10..25", inputmode: "numeric", required: input.required, autocomplete: "off", "data-focus-key": focusKey });
      return element("label", { for: id }, `${humanize(input.name)} (minutes from now, like 10..25)${input.required ? "" : ", optional"}`, control);
    }
    const enumeration = base.match(/^enum\((.*)\)$/);
    if (enumeration) {
      control = element("select", { id, name: input.name, required: input.required, "data-focus-key": focusKey },
        input.required ? null : element("option", { value: "" }, "—"),
        enumeration[1].split(",").map((value) => element("option", { value: value.trim() }, humanize(value.trim()))));
    } else if (base === "bool") {
      control = element("input", { id, name: input.name, type: "checkbox", "data-focus-key": focusKey });
    } else if (base === "int" || base === "double") {
      control = element("input", { id, name: input.name, type: "number", step: base === "int" ? "1" : "any", required: input.required, "data-focus-key": focusKey });
    } else {
      const length = base.match(/^string\((\d+)\)$/);
      control = element("input", { id, name: input.name, type: "text", maxlength: length ? length[1] : null, required: input.required, autocomplete: "off", "data-focus-key": focusKey });
    }
    return element("label", { for: id }, `${humanize(input.name)}${input.required ? "" : " (optional)"}`, control);
  });
  const form = element("form", {
    class: "step-form", "aria-label": `${humanize(transition.to)}: details`,
    onsubmit: (event) => {
      event.preventDefault();
      const values = {};
      for (const input of transition.inputs) {
        const control = form.elements.namedItem(input.name);
        const base = input.type.replace(/\?$/, "");
        if (base === "bool") { values[input.name] = control.checked; continue; }
        if (control.value === "") continue;
        if (base === "date") values[input.name] = `+${Math.round(Number(control.value))}m`;
        else if (base === "daterange") values[input.name] = control.value.split("..").map((minutes) => `+${Number(minutes.trim())}m`).join("..");
        else if (base === "int") values[input.name] = Number.parseInt(control.value, 10);
        else if (base === "double") values[input.name] = Number(control.value);
        else values[input.name] = control.value;
      }
      advance(order, transition, values);
    },
    onkeydown: (event) => { if (event.key === "Escape") { openForm = null; render(); } },
  },
  isCancel(transition) ? element("p", { class: "confirm" }, `Cancel order ${label(order)}? The customer is told at once.`) : null,
  fields,
  element("div", { class: "actions" },
    element("button", { type: "submit", class: isCancel(transition) ? "danger" : "primary" },
      isCancel(transition) ? "Yes, cancel the order" : `Move to ${humanize(transition.to)}`),
    element("button", { type: "button", class: "secondary", onclick: () => { openForm = null; render(); } },
      isCancel(transition) ? "Keep the order" : "Close")));
  return form;
}

async function advance(order, transition, input) {
  messages.delete(order.id);
  const buttons = board.querySelectorAll(`[data-order="${CSS.escape(order.id)}"] button`);
  buttons.forEach((button) => { button.disabled = true; });
  try {
    if (isCancel(transition)) {
      await api(`/v1/orders/${encodeURIComponent(order.id)}/cancel`, { method: "POST", body: input.reason ? { reason: input.reason } : {} });
    } else {
      const body = { expected_state: order.state, input };
      if (transition.event) body.event = transition.event; else body.to = transition.to;
      await api(`/v1/orders/${encodeURIComponent(order.id)}/advance`, { method: "POST", body });
    }
    openForm = null;
  } catch (error) {
    // Never a silent failure: the engine's sentence stays on the card, which shows the
    // order as it is now.
    messages.set(order.id, error.message);
    announce(`Order ${label(order)} was not moved: ${error.message}`);
  }
  await refreshOrder(order.id);
}

function announce(text) {
  announcer.textContent = text;
}

// ---- Preview --------------------------------------------------------------------------

async function select(id) {
  selected = selected === id ? null : id;
  render();
  if (!selected) { previewPanel.hidden = true; return; }
  await showPreview(id);
  previewPanel.hidden = false;
  if (matchMedia("(max-width: 47.99em)").matches) previewPanel.scrollIntoView({ behavior: "smooth", block: "start" });
}

let staleTimer = null;

async function showPreview(id) {
  try {
    const history = await api(`/v1/orders/${encodeURIComponent(id)}/history`);
    const workflow = await workflowOf(history.order);
    if (id !== selected) return;  // another order was chosen meanwhile
    const redrawAt = renderPreview(previewPanel, history, workflow, () => select(id));
    // The pushed stale date passing changes the Lock Screen: draw it again at that moment.
    clearTimeout(staleTimer);
    if (redrawAt) staleTimer = setTimeout(() => { if (selected === id) showPreview(id); }, Math.max(0, redrawAt - Date.now()) + 200);
  } catch (error) {
    previewPanel.replaceChildren(element("p", { class: "message", role: "alert" }, error.message));
  }
}

// ---- Live -----------------------------------------------------------------------------

let events = null;
let lastEventID = null;
let reconnectTimer = null;
let interrupted = false;

function connect() {
  const query = lastEventID ? `?${new URLSearchParams({ after: lastEventID })}` : "";
  events = new EventSource(`/v1/events${query}`);
  events.addEventListener("open", () => {
    connection.textContent = "Live";
    connection.dataset.state = "live";
    offline.hidden = true;
    // Back after an interruption: read everything again rather than trust what was missed.
    if (interrupted) loadAll().catch((error) => { connection.textContent = error.message; });
    interrupted = false;
  });
  const follow = (kind) => (message) => {
    lastEventID = message.lastEventId || lastEventID;
    const event = JSON.parse(message.data);
    if (kind === "transition") refreshOrder(event.order_id);
    else {
      if (event.delivery_id !== undefined && event.device) {
        const newest = attempts.get(event.order_id) ?? new Map();
        const known = newest.get(event.device);
        if (!known || event.delivery_id >= known.id) {
          newest.set(event.device, { id: event.delivery_id, device: event.device, outcome: event.outcome, status: event.status, reason: event.reason });
        }
        attempts.set(event.order_id, newest);
      }
      refreshActivities(event.order_id);
      if (event.order_id === selected) showPreview(selected);
    }
  };
  events.addEventListener("transition", follow("transition"));
  events.addEventListener("push", follow("push"));
  events.addEventListener("error", () => {
    interrupted = true;
    connection.textContent = "Reconnecting…";
    connection.dataset.state = "down";
    offline.hidden = false;
    // The browser retries by itself unless the answer was not a stream (a server that was
    // stopping, a session that ended): then start a new one.
    if (events.readyState === EventSource.CLOSED && !reconnectTimer) {
      reconnectTimer = setTimeout(() => {
        reconnectTimer = null;
        // A session that ended answers 401 here: the page then says how to sign in again.
        loadAll().catch(() => {});
        connect();
      }, 2000);
    }
  });
}

setInterval(() => { for (const node of board.querySelectorAll(".card")) {
  const order = orders.get(node.dataset.order);
  if (order) node.querySelector(".age").textContent = age(order);
} }, 30000);
setInterval(() => { if (selected) showPreview(selected); }, 30000);  // the clock and relative times

// Signing out ends the session on the server (its row is deleted; the cookie no longer opens
// anything), then the page says how to get a new link.
signOutButton.addEventListener("click", async () => {
  signOutButton.disabled = true;
  events?.close();
  try {
    const response = await fetch("/board/sign-out", { method: "POST", headers: { "X-OrderFlow-Board": "1" }, credentials: "same-origin" });
    // 401: the session had ended already (signed out in another tab, or expired).
    if (!response.ok && response.status !== 401) throw new Error(`the server answered ${response.status}`);
    location.replace("/board?signed-out");
  } catch (error) {
    signOutButton.disabled = false;
    announce(`Not signed out: ${error.message}. Try again once the board is live.`);
    connect();
  }
});

loadAll().catch((error) => { board.replaceChildren(element("p", { class: "message", role: "alert" }, error.message)); });
connect();
