// The Lock Screen preview: the card as the customer sees it now, drawn from what was actually
// pushed (the history's deliveries, and the content and alert their transitions rendered),
// not from the order's current state; beside it, once an Android phone was sent the order, its
// Live Update; then the timeline of pushes.

/// "out_for_delivery", "outForDelivery" → "Out for delivery".
export function humanize(name) {
  const words = String(name).replace(/_/g, " ").replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase().trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

const isDate = (value) => typeof value === "string" && /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(value) && !Number.isNaN(Date.parse(value));
/// A `daterange` as the API shows it ("2025-05-01T07:10:00Z..2025-05-01T07:25:00Z") → its two ends, or null.
const dateRange = (value) => {
  const sides = typeof value === "string" ? value.split(/\.{2,3}/) : [];
  return sides.length === 2 && isDate(sides[0]) && isDate(sides[1]) ? sides : null;
};
const isTime = (value) => isDate(value) || dateRange(value) !== null;
const clock = (date) => new Date(date).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
const clockSeconds = (date) => new Date(date).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    // Through the CSSOM: the board's Content-Security-Policy refuses style attributes.
    else if (name === "style") for (const [property, setting] of Object.entries(value)) node.style.setProperty(property, setting);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) if (child !== null && child !== undefined) node.append(child);
  return node;
}

/// Deliveries without a platform predate Android: they went to iPhones.
const platformOf = (delivery) => delivery.platform ?? "ios";

/// What the customer's device shows: the newest delivery APNs (or FCM, for `android`) accepted
/// for the platform, its transition's content, and the newest alert among the transitions that
/// push carried.
export function pushedState(history, platform = "ios") {
  const sent = history.deliveries.filter((delivery) => delivery.outcome === "sent" && platformOf(delivery) === platform)
    .sort((a, b) => a.seq - b.seq || Date.parse(a.attempted_at) - Date.parse(b.attempted_at));
  const last = sent.at(-1);
  if (!last) return null;
  const carried = history.transitions.filter((transition) => transition.seq <= last.seq && transition.seq > last.seq - last.merged)
    .sort((a, b) => a.seq - b.seq);
  const transition = history.transitions.find((candidate) => candidate.seq === last.seq) ?? carried.at(-1);
  if (!transition) return null;
  const alerted = [...carried].reverse().find((candidate) => candidate.aps?.alert);
  return { delivery: last, transition, carried, alert: alerted?.aps?.alert ?? null };
}

/// Draws the preview into `panel`. Returns when it should be drawn again by itself (the pushed
/// stale date, while it is still ahead), or null.
export function renderPreview(panel, history, workflow, close) {
  const order = history.order;
  const pushed = pushedState(history);
  const android = pushedState(history, "android");
  const title = order.attributes?.merchantName ?? order.workflow;
  const number = order.attributes?.orderNumber ?? order.id;
  const heading = element("header", { class: "preview-header" },
    element("h2", {}, `Lock Screen · #${number}`),
    element("button", { type: "button", class: "secondary", onclick: close, "aria-label": `Close the preview of order ${number}` }, "Close"));

  let screen;
  let redrawAt = null;
  if (!pushed) {
    // Attempts that all failed are not "nothing yet": the phone shows nothing because of them.
    const tried = history.deliveries.some((delivery) => platformOf(delivery) === "ios");
    const devices = android ? "iPhones" : "devices";
    screen = element("div", { class: "lock-screen" },
      element("p", { class: "nothing" }, tried
        ? `No push reached this order's ${devices}: APNs refused every attempt (the list of pushes says why), so the Lock Screen shows no activity for it.`
        : `Nothing was pushed to this order's ${devices} yet: the Lock Screen shows no activity for it.`));
  } else {
    const { delivery, transition, alert } = pushed;
    const content = transition.content ?? {};
    const stale = transition.stale_date && Date.parse(transition.stale_date) <= Date.now();
    if (transition.stale_date && !stale && delivery.event !== "end") redrawAt = Date.parse(transition.stale_date);
    const ended = delivery.event === "end";
    const states = workflow.states.filter((state) => !workflow.final_states.includes(state));
    const position = states.indexOf(transition.to);
    const finished = workflow.final_states.includes(transition.to);

    const entries = Object.entries(content).filter(([, value]) => value !== null && value !== undefined && value !== "");
    const headlineEntry = entries.find(([name]) => name === "status") ?? entries.find(([, value]) => typeof value === "string" && !isTime(value) && !value.includes(" "));
    const messageEntry = entries.find(([name]) => name === "message")
      ?? entries.filter(([name, value]) => typeof value === "string" && !isTime(value) && name !== headlineEntry?.[0]).sort((a, b) => b[1].length - a[1].length)[0];
    const dates = entries.filter(([, value]) => isTime(value));
    const others = entries.filter(([name, value]) => name !== headlineEntry?.[0] && name !== messageEntry?.[0] && !isTime(value));

    const activity = element("section", {
      class: `activity${stale ? " stale" : ""}${ended ? " ended" : ""}`, "aria-label": "Live Activity as shown on the Lock Screen",
    },
      element("div", { class: "activity-top" },
        element("span", { class: "app-icon", "aria-hidden": "true" }, String(title).charAt(0).toUpperCase()),
        element("span", { class: "activity-title" }, String(title)),
        element("span", { class: "activity-number" }, `#${number}`)),
      element("p", { class: "activity-headline" }, headlineEntry ? humanize(headlineEntry[1]) : humanize(transition.to)),
      messageEntry ? element("p", { class: "activity-message" }, String(messageEntry[1])) : null,
      // A window shows as "07:10–07:25 (in 10 min)", counted to its start.
      dates.map(([name, value]) => {
        const range = dateRange(value);
        return element("p", { class: "activity-date" },
          element("span", {}, humanize(name)), " ", element("strong", {}, range ? `${clock(range[0])}–${clock(range[1])}` : clock(value)),
          ` (${relative(range ? range[0] : value)})`);
      }),
      others.map(([name, value]) => element("p", { class: "activity-field" }, `${humanize(name)}: ${typeof value === "object" ? JSON.stringify(value) : value}`)),
      states.length > 1 ? element("div", {
        class: "progress", role: "img",
        "aria-label": finished ? "finished" : `step ${position + 1} of ${states.length}`,
      }, states.map((state, index) => element("span", { class: finished || index <= position ? "done" : "" }))) : null,
      stale ? element("p", { class: "badge stale-badge" }, `Stale since ${clock(transition.stale_date)}: the content may be out of date`) : null,
      ended ? element("p", { class: "badge" }, transition.dismissal_date
        ? `Ended · leaves the Lock Screen at ${clock(transition.dismissal_date)}` : "Ended") : null);

    const banner = alert ? element("section", { class: "alert-banner", "aria-label": "Alert shown with the last update" },
      element("span", { class: "app-icon small", "aria-hidden": "true" }, String(title).charAt(0).toUpperCase()),
      element("div", {},
        element("p", { class: "alert-title" }, alertText(alert.title)),
        alert.body ? element("p", { class: "alert-body" }, alertText(alert.body)) : null)) : null;

    screen = element("div", { class: "lock-screen" },
      element("p", { class: "lock-clock", "aria-hidden": "true" }, clock(Date.now())),
      banner, activity,
      element("p", { class: "caption" },
        `As pushed at ${clockSeconds(delivery.attempted_at)} (${delivery.event}, transition ${transition.seq} to ${humanize(transition.to)})` +
        (order.seq > transition.seq ? `; the order is at transition ${order.seq} (${humanize(order.state)}), not pushed yet` : "")));
  }

  const timeline = element("section", { class: "timeline", "aria-label": "Pushes" },
    element("h3", {}, "Pushes"),
    history.deliveries.length === 0 ? element("p", { class: "nothing" }, "No push attempted yet.") : element("ol", {},
      [...history.deliveries].sort((a, b) => Date.parse(b.attempted_at) - Date.parse(a.attempted_at) || b.id - a.id).map((delivery) =>
        element("li", { class: `push ${delivery.outcome}` },
          element("span", { class: "push-time" }, clockSeconds(delivery.attempted_at)),
          element("span", { class: "push-event" }, delivery.event),
          element("span", { class: "push-priority", title: "APNs priority" }, delivery.priority === 10 ? "priority 10 (now)" : `priority ${delivery.priority} (when convenient)`),
          element("span", { class: "push-outcome" }, outcomeText(delivery)),
          element("span", { class: "push-device" }, `${platformOf(delivery) === "android" ? "Android · " : ""}${delivery.device} · transition ${delivery.seq}${delivery.merged > 1 ? ` (${delivery.merged} merged)` : ""}`)))));

  panel.replaceChildren(heading, element("div", { class: "preview-body" }, screen, android ? liveUpdate(android, history) : null, timeline));
  return redrawAt;
}

/// The Android phone's notification shade: the order's Live Update as Android draws a promoted
/// ProgressStyle notification from the FCM data message it was sent — the delivery's own
/// (`android`: what the worker sent for the transitions it merged; else the newest transition's):
/// its title, text, segments with their colours, the point, the status-bar chip and the time
/// (`when`), the workflow's `android:` overrides included.
function liveUpdate({ delivery, carried }, history) {
  const order = history.order;
  const app = String(order.attributes?.merchantName ?? order.workflow);
  const caption = `As sent to Android at ${clockSeconds(delivery.attempted_at)} (${delivery.event}, transition ${delivery.seq})`;
  const message = delivery.android ?? [...carried].reverse().find((transition) => transition.android)?.android;
  if (!message) {
    return element("div", { class: "android-screen", "aria-label": "Android Live Update as shown in the notification shade" },
      element("p", { class: "nothing" }, "The history does not show the message this Android phone was sent."),
      element("p", { class: "caption" }, caption));
  }
  const ended = message.event === "end";
  const when = /^\d+$/.test(message.when ?? "") ? Number(message.when) : null;
  const counting = when !== null && !ended && when > Date.now();
  const title = message.title ?? message.title_loc_key ?? humanize(message.state);
  const text = message.text ?? message.text_loc_key ?? null;
  return element("div", { class: "android-screen", "aria-label": "Android Live Update as shown in the notification shade" },
    element("p", { class: "status-bar" },
      element("span", {}, clock(Date.now())),
      ended ? null : element("span", { class: "chip", title: "The status-bar chip" },
        element("span", { class: "chip-icon", "aria-hidden": "true" }, app.charAt(0).toUpperCase()),
        message.chip ? element("span", { class: "chip-text" }, message.chip)
          : counting ? element("span", { class: "chip-text" }, relative(when).replace(/^in /, "")) : null)),
    element("section", { class: `live-update${ended ? " ended" : ""}` },
      element("div", { class: "live-update-top" },
        element("span", { class: "app-icon tiny", "aria-hidden": "true" }, app.charAt(0).toUpperCase()),
        element("span", {}, app),
        element("span", { class: "live-update-kind" }, ended ? "· notification" : "· Live Update"),
        when !== null ? element("span", { class: "live-update-when" }, counting ? relative(when) : clock(when)) : null),
      element("p", { class: "live-update-title" }, title),
      text ? element("p", { class: "live-update-text" }, text) : null,
      progressBar(message),
      ended ? element("p", { class: "badge" }, endText(message)) : null),
    element("p", { class: "caption" }, caption));
}

/// The ProgressStyle bar of a data message: `segments` (`length[:#RRGGBB]`, in order) and the
/// point at `progress`, in the segments' units; the tracker is the message's `icon`.
function progressBar(message) {
  const segments = String(message.segments ?? "").split(",").map((part) => {
    const [length, color] = part.split(":");
    return { length: Number(length), color: /^#[0-9A-Fa-f]{6}$/.test(color ?? "") ? color : null };
  }).filter((segment) => segment.length > 0);
  if (segments.length === 0) return null;
  const total = segments.reduce((sum, segment) => sum + segment.length, 0);
  const progress = Math.min(Math.max(Number(message.progress) || 0, 0), total);
  let start = 0;
  const drawn = segments.map((segment) => {
    const reached = start < progress;
    start += segment.length;
    return element("span", {
      class: `segment${reached ? " done" : ""}`, "data-color": segment.color,
      style: segment.color ? { "flex-grow": String(segment.length), "--segment": segment.color } : { "flex-grow": String(segment.length) },
    });
  });
  return element("div", {
    class: "segments", role: "img", "data-progress": String(progress),
    "aria-label": `at ${progress} of ${total}, ${segments.length} segments`,
  }, drawn, element("span", {
    class: "tracker", style: { left: `${(100 * progress) / total}%` }, title: message.icon ? `tracker icon ${message.icon}` : "tracker",
    "data-icon": message.icon,
  }));
}

/// How an ended Live Update leaves the shade, as the message's `dismiss` says.
function endText(message) {
  if (message.dismiss === "now") return "Ended · removed from the shade";
  if (message.dismiss === "at" && /^\d+$/.test(message.dismiss_at ?? "")) return `Ended · leaves the shade at ${clock(Number(message.dismiss_at))}`;
  return "Ended";
}

function outcomeText(delivery) {
  const words = { sent: "sent", retry: "retrying", dead: "failed", token_dead: "token dead", rejected: "rejected" };
  const status = delivery.status ? ` ${delivery.status}` : "";
  return `${words[delivery.outcome] ?? delivery.outcome}${status}${delivery.reason ? ` ${delivery.reason}` : ""}`;
}

// An alert's text as APNs carries it: a string, or a localized key with arguments.
function alertText(value) {
  if (typeof value === "string") return value;
  if (value && typeof value === "object") return value["loc-key"] ?? JSON.stringify(value);
  return "";
}

function relative(date) {
  const minutes = Math.round((new Date(date).getTime() - Date.now()) / 60000);
  if (minutes === 0) return "now";
  return minutes > 0 ? `in ${minutes} min` : `${-minutes} min ago`;
}
