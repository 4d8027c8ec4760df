// @ts-check
// The Scheduler console: plain JavaScript, no build step, nothing loaded from elsewhere.
// It reads through /console/api/* and changes things through the management API itself, with
// the function key or token the user typed (kept in sessionStorage: this tab only), or, in Azure,
// as whoever signed in through the platform (its session cookie goes with every request).
import { activityOf, activityTable, activityView } from "./activity.js";
import { attentionSummary, attentionView } from "./attention.js";
import { historyCharts } from "./charts.js";
import { collectionForm, jobForm } from "./forms.js";
import { rolesView } from "./roles.js";
import { importForm, templateButtons } from "./templates.js";


const KEY_ITEM = "scheduler-console-key";
const TOKEN = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;
const PLATFORM = "platform"; // signed in through the platform's sign-in: no key, no token
export const API_VERSION = "2016-03-01";
const REFRESH_EVERY_MS = 10000;
const FOLLOW_EVERY_MS = 700; // while an action's effect is awaited (a run now's history entry)
const FOLLOW_FOR_MS = 20000;
export const PREVIEW_DELAY_MS = 350; // after the last keystroke, before the preview is asked for
export const PREVIEW_COUNT = 5;
const HISTORY_SHOWN = 50;
const HISTORY_STATUSES = ["Completed", "Failed", "Postponed"];

export const console_ = {
  key: sessionStorage.getItem(KEY_ITEM),
  me: /** @type {SignedIn | null} */ (null), // who is signed in, and their role (/console/api/me)
  historyStatus: "",
  rendering: false,
  follow: null, // {until, done(data) -> text|null}: refresh often until `done` says so
  shownHash: null, // the page on screen: a refresh of the same one updates it in place
  pendingNotice: null, // the result to show on the page being opened
  again: null, // a refresh asked for while one was under way: {moveFocus}
};

// --- talking to the app ------------------------------------------------------------------

export class KeyRefused extends Error {}

/**
 * One problem of an ARM error answer (`error.details[]`).
 * @typedef {{target?: string, code?: string, message: string}} ProblemDetail
 */

/**
 * Who is signed in (GET /console/api/me).
 * @typedef {object} SignedIn
 * @property {string} name
 * @property {string} objectId
 * @property {boolean} administrator
 * @property {string | null} role the strongest role over the whole service, lower case
 * @property {string} roleName
 * @property {{role: string, scope: string}[]} grants role assignments, at any scope
 */

export class ApiFailed extends Error {
  /**
   * @param {number} status the HTTP status of the answer
   * @param {string} message
   * @param {ProblemDetail[]} [details]
   * @param {any} [body] any JSON: an import's report (`resources`), or any other error answer
   */
  constructor(status, message, details = [], body = null) {
    super(message);
    this.status = status;
    this.details = details; // ARM's error details: {target: a JSON path, message}
    this.body = body; // the whole answer: an import's report comes beside its error
  }
}

/**
 * One call to the app; an answer other than 2xx becomes an ApiFailed.
 * @param {string} method
 * @param {string} path
 * @param {{query?: Record<string, string>, body?: unknown}} [options]
 */
export async function call(method, path, { query = {}, body } = {}) {
  const url = new URL(path, location.origin);
  for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value);
  // A token (three base64url parts) goes as a bearer token; anything else is the function key.
  // Signed in through the platform, there is neither: its cookie says who is calling.
  /** @type {Record<string, string>} */
  const headers = {};
  if (console_.key && TOKEN.test(console_.key)) headers.Authorization = `Bearer ${console_.key}`;
  else if (console_.key && console_.key !== PLATFORM) headers["x-functions-key"] = console_.key;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
  });
  if (response.status === 401) throw new KeyRefused();
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (!response.ok) {
    const error = parsed && parsed.error;
    const message = error ? error.message : `The app answered ${response.status}.`;
    throw new ApiFailed(response.status, message, (error && error.details) || [], parsed);
  }
  return parsed;
}

export const consoleApi = (path) => call("GET", `/console/api/${path}`);
export const arm = (method, resourceId, suffix = "", options = {}) =>
  call(method, resourceId + suffix, {
    ...options, query: { "api-version": API_VERSION, ...(options.query || {}) },
  });

export const encoded = (...parts) => parts.map(encodeURIComponent).join("/");

export function collectionId(subscription, group, name) {
  return `/subscriptions/${encodeURIComponent(subscription)}/resourceGroups/${encodeURIComponent(group)}` +
    `/providers/Microsoft.Scheduler/jobCollections/${encodeURIComponent(name)}`;
}

// --- building the page -------------------------------------------------------------------

// Elements are built with text nodes only: nothing the app returns is ever parsed as HTML.
// Event handlers live in `element.handlers`, so that a refresh that keeps an element (see
// `morph`) gives it the new page's handlers along with its new text.
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === false || value === null || value === undefined) continue;
    if (name.startsWith("on")) on(element, name.slice(2), value);
    else if (name === "class") element.className = value;
    else if (name === "value") element.value = value;
    else element.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

export function on(element, type, handler) {
  if (!element.handlers) element.handlers = {};
  if (!element.handlers[type]) {
    element.addEventListener(type, (event) => element.handlers[type](event));
  }
  element.handlers[type] = handler;
}

// A refresh updates the page in place: elements of the same kind in the same place are kept
// (with the focus, the pointer's hover and an open <details>), only what changed is rewritten.
function morph(parent, children) {
  const old = Array.from(parent.childNodes);
  children.forEach((next, index) => {
    const current = old[index];
    if (!current) parent.append(next);
    else if (sameKind(current, next)) update(current, next);
    else parent.replaceChild(next, current);
  });
  for (const extra of old.slice(children.length)) extra.remove();
}

function sameKind(current, next) {
  if (current.nodeType !== next.nodeType) return false;
  if (current.nodeType !== Node.ELEMENT_NODE) return true;
  return current.tagName === next.tagName && (current.dataset.key || "") === (next.dataset.key || "");
}

const KEPT_ATTRIBUTES = new Set(["style", "open"]); // set by the page or the user, not by data

export function update(current, next) {
  if (current.nodeType !== Node.ELEMENT_NODE) {
    if (current.data !== next.data) current.data = next.data;
    return;
  }
  for (const { name } of Array.from(current.attributes)) {
    if (!next.hasAttribute(name) && !KEPT_ATTRIBUTES.has(name)) current.removeAttribute(name);
  }
  for (const { name, value } of Array.from(next.attributes)) {
    if (current.getAttribute(name) !== value) current.setAttribute(name, value);
  }
  for (const [type, handler] of Object.entries(next.handlers || {})) on(current, type, handler);
  if ("value" in next && current.value !== next.value && document.activeElement !== current) {
    current.value = next.value;
  }
  morph(current, Array.from(next.childNodes));
}

export function exactTime(iso) {
  // "2026-12-01T02:30:19.5Z" -> "2026-12-01 02:30:19 UTC": to the second, as runs are recorded.
  return iso.replace("T", " ").replace(/(\.\d+)?(Z|\+00:00)$/, "") + " UTC";
}

// The same instant on the wall clock of a job's time zone ({name as written, iana}).
function localTime(iso, zone) {
  const parts = new Intl.DateTimeFormat("en-GB", {
    timeZone: zone.iana, year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
  }).formatToParts(new Date(iso));
  const part = Object.fromEntries(parts.map(({ type, value }) => [type, value]));
  return `${part.year}-${part.month}-${part.day} ${part.hour}:${part.minute}:${part.second} ${zone.name}`;
}

function relativeTime(iso) {
  const seconds = Math.round((Date.parse(iso) - Date.now()) / 1000);
  const size = Math.abs(seconds);
  if (size < 5) return "just now";
  const [amount, unit] =
    size < 90 ? [size, "s"] : size < 5400 ? [Math.round(size / 60), "min"]
      : size < 129600 ? [Math.round(size / 3600), "h"] : [Math.round(size / 86400), "d"];
  return seconds >= 0 ? `in ${amount} ${unit}` : `${amount} ${unit} ago`;
}

// A time to the second in UTC; in the job's zone too when it has one; and how far away it is.
export function when(iso, zone = null) {
  if (!iso) return h("span", { class: "empty" }, "none");
  return h("time", { class: "when", datetime: iso }, exactTime(iso),
    zone ? h("small", { class: "local" }, localTime(iso, zone)) : null,
    h("small", {}, relativeTime(iso)));
}

export function badge(text) {
  return h("span", { class: `badge ${text}` }, text);
}

// A job's state, with the reason a client gave when it set it (the classic API's stateDetails).
function jobState(job) {
  return h("span", { class: "state" }, badge(job.state),
    job.stateReason ? [" ", h("small", { class: "reason" }, job.stateReason)] : null,
    troubleMarks(job));
}

// What is wrong with a job, in colour and in words (the words carry it without the colour).
function troubleMarks(job) {
  if (!job.trouble || job.trouble.length === 0) return null;
  return h("ul", { class: "trouble-list" },
    job.trouble.map(({ kind, words }) => h("li", { class: `trouble ${kind}` }, words)));
}

export function cell(label, ...content) {
  return h("td", { "data-label": label }, ...content);
}

// A table scrolls sideways inside its own box when it cannot fit, never the whole page.
export function table(headings, rows, emptyText, caption = null) {
  if (rows.length === 0) return h("p", { class: "empty" }, emptyText);
  return h("div", { class: "table-fit" }, h("table", { class: "cards" },
    caption ? h("caption", { class: "visually-hidden" }, caption) : null,
    h("thead", {}, h("tr", {}, headings.map((text) => h("th", { scope: "col" }, text)))),
    h("tbody", {}, rows)));
}

// An action's result, shown at once where the eye is (and read out by screen readers).
export function notify(text, kind = "done") {
  const notice = document.getElementById("notice");
  notice.className = `notice ${kind}`;
  notice.textContent = text;
}

// Goes to another page, with the result of what took the user there.
export function navigate(hash, result) {
  console_.pendingNotice = result;
  location.hash = hash;
}

function setTrail(...steps) {
  const trail = document.getElementById("trail");
  morph(trail, steps.map(([text, href]) =>
    h("li", {}, href ? h("a", { href }, text) : h("span", { "aria-current": "page" }, text))));
}

// --- actions ---------------------------------------------------------------------------

export function actionButton(text, focusKey, work, extra = {}) {
  return h("button", {
    type: "button",
    "data-focus": focusKey,
    ...extra,
    onclick: async (event) => {
      const button = event.currentTarget;
      button.disabled = true;
      try {
        const done = await work();
        if (done) notify(done);
        await refresh();
      } catch (failure) {
        handleFailure(failure);
      } finally {
        button.disabled = false;
      }
    },
  }, text);
}

function confirmDelete(what) {
  const dialog = /** @type {HTMLDialogElement} */ (document.getElementById("confirm"));
  document.getElementById("confirm-text").textContent =
    `Delete ${what}? Its history goes with it; this cannot be undone.`;
  document.getElementById("confirm-button").textContent = `Delete ${what}`;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "confirm"), { once: true });
  });
}

// "/subscriptions/s/resourceGroups/g/providers/Microsoft.Scheduler/jobCollections/c/jobs/j"
// -> "collections/s/g/c/jobs/j", the console's own address of it.
export function jobPath(armId) {
  const parts = armId.split("/");
  return ["collections", parts[2], parts[4], parts[8], "jobs", parts[10]].join("/");
}

export function collectionPath(armId) {
  const parts = armId.split("/");
  return ["collections", parts[2], parts[4], parts[8]].join("/");
}

function jobActions(job) {
  const enabled = job.state === "enabled";
  const lastStart = job.lastRun ? job.lastRun.startTime : null;
  return h("div", { class: "actions" },
    actionButton("Run now", `run:${job.id}`, async () => {
      await arm("POST", job.id, "/run");
      // The run happens on the execution queue: follow the job until its attempt is recorded.
      console_.follow = {
        until: Date.now() + FOLLOW_FOR_MS,
        done: (seen) => {
          const last = seen && seen[job.id] && seen[job.id].lastRun;
          return last && last.startTime !== lastStart
            ? `${job.name} ran: ${last.status}.` : null;
        },
      };
      return `${job.name} was started; its result appears here when it has run.`;
    }, { "aria-label": `Run now: ${job.name}`, "data-needs": "operator" }),
    h("a", { class: "button", href: `#/${jobPath(job.id)}/edit`, "aria-label": `Edit ${job.name}`,
      "data-needs": "contributor" }, "Edit"),
    actionButton(enabled ? "Disable" : "Enable", `state:${job.id}`, async () => {
      const state = enabled ? "Disabled" : "Enabled";
      await arm("PATCH", job.id, "", { body: { properties: { state } } });
      return `${job.name} is ${state.toLowerCase()}.`;
    }, { "aria-label": `${enabled ? "Disable" : "Enable"} ${job.name}`, "data-needs": "operator" }),
    actionButton("Delete", `delete:${job.id}`, async () => {
      if (!(await confirmDelete(`job ${job.name}`))) return null;
      await arm("DELETE", job.id);
      if (!location.hash.includes("/jobs/")) return `${job.name} was deleted.`;
      navigate(`#/${collectionPath(job.id)}`, `${job.name} was deleted.`);
      return null;
    }, { class: "danger", "aria-label": `Delete ${job.name}`, "data-needs": "contributor" }));
}

function collectionActions(collection) {
  const enabled = collection.state === "Enabled";
  return h("div", { class: "actions" },
    actionButton(enabled ? "Disable" : "Enable", `collection:${collection.id}`, async () => {
      await arm("POST", collection.id, enabled ? "/disable" : "/enable");
      return `Collection ${collection.name} and its jobs are ${enabled ? "disabled" : "enabled"}.`;
    }, { "aria-label": `${enabled ? "Disable" : "Enable"} collection ${collection.name}`,
      "data-needs": "operator" }),
    h("a", { class: "button", href: `#/${collectionPath(collection.id)}/edit`,
      "aria-label": `Edit collection ${collection.name}`, "data-needs": "contributor" }, "Edit"));
}

// --- the views -------------------------------------------------------------------------

function troubleSummary(counts) {
  const words = { faulted: "faulted", retrying: "retrying", failing: "last run failed", late: "late" };
  const found = Object.entries(words).filter(([kind]) => counts[kind] > 0)
    .map(([kind, text]) => h("li", { class: `trouble ${kind}` }, `${counts[kind]} ${text}`));
  return found.length ? h("ul", { class: "trouble-list" }, found) : h("span", { class: "fine" }, "none");
}

async function overview() {
  const { value: collections, attention } = await consoleApi("collections");
  const rows = collections.map((c) => h("tr", { "data-key": c.id,
    class: Object.values(c.trouble).some(Boolean) ? "in-trouble" : null },
  cell("Collection", h("a", { href: `#/${collectionPath(c.id)}`, "data-focus": `open:${c.id}` }, c.name)),
  cell("Resource group", c.resourceGroup),
  cell("Subscription", h("span", { class: "mono" }, c.subscription)),
  cell("Location", c.location || ""),
  cell("Plan", c.sku),
  cell("State", badge(c.state)),
  cell("Jobs by state", `${c.jobs.total}: ${c.jobs.enabled} enabled, ${c.jobs.disabled} disabled, ` +
      `${c.jobs.completed} completed, ${c.jobs.faulted} faulted`),
  cell("Jobs in trouble", troubleSummary(c.trouble)),
  cell("Actions", collectionActions(c))));
  return {
    trail: [["Job collections"]],
    content: [
      h("div", { class: "heading" }, h("h1", {}, "Job collections"),
        h("div", { class: "actions" },
          h("a", { class: "button", href: "#/import", "data-needs": "contributor" }, "Import template"),
          h("a", { class: "button primary", href: "#/new-collection", "data-needs": "contributor" },
            "New collection"))),
      attentionSummary(attention),
      table(["Collection", "Resource group", "Subscription", "Location", "Plan", "State",
        "Jobs by state", "Jobs in trouble", "Actions"],
      rows, "No job collections yet: make one with New collection.", "Job collections"),
      collections.length ? h("p", { class: "explain" },
        "Jobs by state counts jobs, not runs: a job is faulted only when its schedule ended on a " +
        "failure. Jobs in trouble counts jobs whose last run failed, that are retrying a failed " +
        "attempt, that are faulted, or that are late (past their next run and not started).") : null,
    ],
  };
}

async function collectionView(subscription, group, name) {
  const path = encoded(subscription, group, name);
  const { collection, jobs, timeline } = await consoleApi(`collections/${path}`);
  const rows = jobs.map((job) => h("tr", { "data-key": job.id, class: job.trouble.length ? "in-trouble" : null },
    cell("Job", h("a", { href: `#/${jobPath(job.id)}`, "data-focus": `open:${job.id}` }, job.name)),
    cell("State", jobState(job)),
    cell("Schedule", job.schedule),
    cell("Action", job.action),
    cell("Next run", when(job.nextRun, job.timeZone)),
    cell("Last run", lastRun(job.lastRun, job.timeZone)),
    h("td", { class: "number", "data-label": "Runs / failed / faulted" },
      `${job.counts.executions} / ${job.counts.failures} / ${job.counts.faulted}`),
    cell("Actions", jobActions(job))));
  return {
    trail: [["Job collections", "#/"], [collection.name]],
    seen: Object.fromEntries(jobs.map((job) => [job.id, job])),
    content: [
      h("div", { class: "heading" }, h("h1", {}, `Collection ${collection.name}`),
        h("div", { class: "actions" },
          h("a", { class: "button", href: `#/activity/${encoded(subscription)}` }, "Activity log"),
          h("a", { class: "button", href: `#/roles/${encoded(subscription)}`, "data-needs": "contributor" },
            "Role assignments"),
          h("a", { class: "button primary", href: `#/collections/${path}/new-job`, "data-needs": "contributor" },
            "New job"))),
      h("dl", { class: "facts" },
        h("dt", {}, "State"), h("dd", {}, badge(collection.state), " ", collectionActions(collection)),
        h("dt", {}, "Plan"), h("dd", {}, collection.sku),
        h("dt", {}, "Resource group"), h("dd", {}, collection.resourceGroup),
        h("dt", {}, "Location"), h("dd", {}, collection.location || ""),
        h("dt", {}, "Jobs"), h("dd", {}, `${collection.jobs.total}` +
          (collection.quota.maxJobCount ? ` of at most ${collection.quota.maxJobCount}` : "")),
        h("dt", {}, "In trouble"), h("dd", {}, troubleSummary(collection.trouble)),
        h("dt", {}, "Template"), h("dd", {}, templateButtons(collection))),
      h("h2", {}, "Jobs"),
      table(["Job", "State", "Schedule", "Action", "Next run", "Last run", "Runs / failed / faulted", "Actions"],
        rows, "No jobs in this collection yet: make one with New job.", "Jobs"),
      jobs.length ? h("p", { class: "explain" },
        "Runs / failed / faulted: runs counts every try of the main action, retries included; " +
        "failed, the tries that failed; faulted, the occurrences whose every retry failed (the " +
        "errorAction ran then, if there is one). One occurrence retried twice in vain shows " +
        "3 runs, 3 failed, 1 faulted.") : null,
      h("h2", { id: "timeline-title" }, "Next 24 hours"),
      timelineView(timeline),
      await historyCharts(jobs.map((job) => job.id)),
    ],
  };
}

function lastRun(last, zone) {
  if (!last) return h("span", { class: "empty" }, "never");
  const retry = last.retryCount ? `, retry ${last.retryCount}` : "";
  const action = last.actionName === "ErrorAction" ? " (errorAction)" : "";
  return h("span", {}, when(last.startTime, zone), badge(last.status), action + retry);
}

function timelineView(timeline) {
  const start = Date.parse(timeline.from);
  const span = Date.parse(timeline.until) - start;
  if (timeline.jobs.length === 0) {
    return h("p", { class: "empty" }, "No enabled jobs: nothing runs in the next 24 hours.");
  }
  const hours = [0, 6, 12, 18, 24].map((offset) =>
    exactTime(new Date(start + offset * 3600000).toISOString()).slice(11, 16));
  return h("div", {},
    h("figure", { class: "timeline", "aria-labelledby": "timeline-title" },
      h("div", { class: "axis", "aria-hidden": "true" }, hours.map((text) => h("span", {}, text))),
      timeline.jobs.map((row) => {
        const marks = row.runs.map((iso) => h("span", {
          class: "run", title: row.timeZone ? `${exactTime(iso)} (${localTime(iso, row.timeZone)})` : exactTime(iso),
          "data-at": String(((Date.parse(iso) - start) / span) * 100),
        }));
        const words = row.runs.length === 0 ? "no runs"
          : `${row.runs.length}${row.more ? "+" : ""} run${row.runs.length === 1 ? "" : "s"}, ` +
            `first at ${exactTime(row.runs[0])}`;
        const daysOff = (row.excluded || []).map((item) => h("span", { // a symbol, not colour alone
          class: "day-off", title: `${item.movedTo ? "Moved" : "Skipped"}: ${exactTime(item.scheduled)}, ${item.reason}`,
          "data-at": String(((Date.parse(item.scheduled) - start) / span) * 100) }, item.movedTo ? "↷" : "⊘"));
        const offWords = daysOff.length ? `; ${daysOff.map((mark) => mark.title).join("; ")}` : "";
        const track = h("div", { class: "track", role: "img", "aria-label": `${row.name}: ${words}${offWords}` }, marks, daysOff);
        if (row.more) {
          const last = row.runs[row.runs.length - 1];
          track.append(h("span", { class: "busy", "data-from": String(((Date.parse(last) - start) / span) * 100) }));
        }
        return h("div", { class: "row", "data-key": row.name }, h("span", {}, row.name), track);
      })),
    h("p", { class: "legend" },
      h("span", { class: "key-run", "aria-hidden": "true" }), " one run (point at it for its time) ",
      h("span", { class: "key-busy", "aria-hidden": "true" }),
      " runs too many to draw one by one (over 200 in the day); ⊘ a run skipped on a day off, ↷ one moved to " +
      "a business day (point at it for the reason). Hours are UTC, from now; disabled jobs have no row."));
}

// Positions are set through the CSS object model: the content security policy allows no
// inline style attributes.
function placeMarks(root) {
  for (const mark of root.querySelectorAll(".run[data-at], .day-off[data-at]")) mark.style.left = `${mark.dataset.at}%`;
  for (const bar of root.querySelectorAll(".busy[data-from]")) bar.style.left = `${bar.dataset.from}%`;
}

async function jobView(subscription, group, name, jobName) {
  const job = await consoleApi(`collections/${encoded(subscription, group, name, "jobs", jobName)}`);
  const query = { $top: String(HISTORY_SHOWN) };
  if (console_.historyStatus) query.$filter = `status eq ${console_.historyStatus}`;
  const [{ value: history }, activity] = await Promise.all([
    arm("GET", job.id, "/history", { query }), activityOf(subscription, job.id)]);
  const zone = job.timeZone;
  const filter = h("select", {
    id: "history-status",
    onchange: (event) => { console_.historyStatus = event.target.value; refresh(); },
  }, h("option", { value: "" }, "All"), HISTORY_STATUSES.map((status) =>
    h("option", { value: status, selected: status === console_.historyStatus }, status)));
  const rows = history.map(({ id, properties: entry }) => h("tr", { "data-key": id },
    cell("Expected", when(entry.expectedExecutionTime, zone)),
    cell("Started", when(entry.startTime, zone)),
    cell("Action", entry.actionName === "ErrorAction" ? "errorAction" : "action"),
    cell("Status", badge(entry.status)),
    h("td", { class: "number", "data-label": "Retry" }, String(entry.retryCount)),
    h("td", { class: "number", "data-label": "Occurrence" }, String(entry.repeatCount)),
    cell("Message", message(entry.message || ""))));
  return {
    trail: [["Job collections", "#/"], [name, `#/collections/${encoded(subscription, group, name)}`], [job.name]],
    seen: { [job.id]: job },
    content: [
      h("h1", {}, `Job ${job.name}`),
      h("dl", { class: "facts" },
        h("dt", {}, "State"), h("dd", {}, jobState(job)),
        h("dt", {}, "Schedule"), h("dd", {}, job.schedule),
        h("dt", {}, "Action"), h("dd", {}, job.action),
        h("dt", {}, "Next run"), h("dd", {}, when(job.nextRun, zone)),
        h("dt", {}, "Last run"), h("dd", {}, lastRun(job.lastRun, zone)),
        h("dt", {}, "Runs"), h("dd", {},
          `${job.counts.executions} runs, ${job.counts.failures} failed, ${job.counts.faulted} faulted`,
          h("small", { class: "explain" }, " (runs and failed count every try, retries included; " +
            "faulted counts occurrences whose every try failed)"))),
      jobActions(job),
      h("h2", {}, job.state === "enabled" ? "Next occurrences" : "Next occurrences, if enabled"),
      job.nextOccurrences.length
        ? h("ol", { class: "occurrences" }, job.nextOccurrences.map((iso) => h("li", {}, when(iso, zone))))
        : h("p", { class: "empty" }, "None: the schedule has no more occurrences."),
      await historyCharts([job.id]),
      h("h2", {}, "History"),
      h("div", { class: "filter" }, h("label", { for: "history-status" }, "Status"), filter),
      table(["Expected", "Started", "Action", "Status", "Retry", "Occurrence", "Message"],
        rows, "No history yet.", "History, newest first"),
      rows.length ? h("p", { class: "explain" },
        "Retry is 0 for an occurrence's first try; Occurrence is its number in the series " +
        "(0 for a run now).") : null,
      h("h2", {}, "Activity"),
      activityTable(activity, "No changes recorded in the last 7 days.", "Changes to this job, newest first"),
      h("h2", {}, "Definition"),
      h("p", { class: "empty" }, "Secrets (passwords, keys, tokens, certificates) are never shown."),
      h("pre", { class: "definition", tabindex: "0", "aria-label": "Definition" },
        JSON.stringify(job.definition, null, 2)),
    ],
  };
}

export function message(text) {
  const firstLine = text.split("\n", 1)[0];
  if (firstLine.length <= 100 && firstLine === text) return text;
  return h("details", {}, h("summary", {}, firstLine.slice(0, 100) || "(details)"), h("pre", {}, text));
}

// A page whose job or collection does not exist (any more): one clear message and a way back.
function notFound(what, back, backText) {
  return {
    trail: [["Job collections", "#/"], ["Not found"]],
    content: [
      h("h1", {}, "Not found"),
      h("p", {}, `${what} does not exist: it may have been deleted, or the address is wrong.`),
      h("p", {}, h("a", { href: back }, backText)),
    ],
  };
}

// --- routing, refreshing, signing in -----------------------------------------------------

export function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const [first, subscription, group, name, fifth, jobName, seventh] = parts;
  const overviewBack = ["#/", "Back to the job collections"];
  if (first === "new-collection" && parts.length === 1) return { form: () => collectionForm(null) };
  if (first === "import" && (parts.length === 1 || parts.length === 3)) {
    return { form: () => importForm(parts.length === 3 ? [subscription, group] : null) };
  }
  if (first === "attention" && parts.length === 1) return { view: attentionView };
  if (first === "activity" && parts.length === 2) return { view: () => activityView(subscription) };
  if (first === "roles" && parts.length === 2) return { form: () => rolesView(subscription) };
  if (first !== "collections" || parts.length < 4) return { view: overview };
  const collection = `#/collections/${encoded(subscription, group, name)}`;
  const missingCollection = () => notFound(`The job collection '${name}'`, ...overviewBack);
  if (parts.length === 4) return { view: () => collectionView(subscription, group, name), missing: missingCollection };
  if (parts.length === 5 && fifth === "edit") {
    return { form: () => collectionForm([subscription, group, name]), missing: missingCollection };
  }
  if (parts.length === 5 && fifth === "new-job") {
    return { form: () => jobForm([subscription, group, name], null), missing: missingCollection };
  }
  const missingJob = (failure) => (failure.message.startsWith("Job ")
    ? notFound(`The job '${jobName}'`, collection, `Back to collection ${name}`) : missingCollection());
  if (parts.length === 6 && fifth === "jobs") {
    return { view: () => jobView(subscription, group, name, jobName), missing: missingJob };
  }
  if (parts.length === 7 && fifth === "jobs" && seventh === "edit") {
    return { form: () => jobForm([subscription, group, name], jobName), missing: missingJob };
  }
  return { view: overview };
}

export async function refresh({ moveFocus = false } = {}) {
  if (!console_.key) return showSignIn("");
  if (!console_.me) {
    try {
      await whoAmI();
    } catch (failure) {
      return handleFailure(failure);
    }
  }
  if (console_.rendering) {
    // One at a time; a page opened meanwhile is drawn when this one is done, not dropped.
    console_.again = { moveFocus: moveFocus || (console_.again && console_.again.moveFocus) };
    return;
  }
  const hash = location.hash;
  const page = route();
  if (page.form && console_.shownHash === hash) return; // a form is never redrawn under the user
  console_.rendering = true;
  const view = document.getElementById("view");
  const active = document.activeElement;
  const focused = active instanceof HTMLElement ? active.dataset.focus || active.id : null;
  try {
    let shown;
    try {
      shown = await (page.form || page.view)();
      document.getElementById("problem").textContent = "";
    } catch (failure) {
      if (!(failure instanceof ApiFailed && failure.status === 404 && page.missing)) throw failure;
      shown = page.missing(failure);
      console_.follow = null;
    }
    if (location.hash !== hash) return; // the user moved on meanwhile
    setTrail(...shown.trail);
    const content = shown.content.filter(Boolean);
    const samePage = console_.shownHash === hash && !page.form;
    if (samePage) morph(view, content);
    else view.replaceChildren(...content);
    console_.shownHash = hash;
    placeMarks(view);
    document.title = `${shown.trail[shown.trail.length - 1][0]} · Scheduler console`;
    document.getElementById("sign-out").hidden = false;
    document.getElementById("updated").textContent =
      `Updated ${exactTime(new Date().toISOString()).slice(11)}`;
    if (console_.follow) followUp(shown.seen);
    // An element the update replaced gives the focus to its successor.
    const again = focused && !view.contains(document.activeElement) &&
      (/** @type {HTMLElement | null} */ (view.querySelector(`[data-focus="${CSS.escape(focused)}"]`)) ||
        document.getElementById(focused));
    // The focus moves to a page just opened; a page updated in place keeps it where it is.
    if (moveFocus && !samePage) (/** @type {HTMLElement | null} */ (view.querySelector("[autofocus]")) || view).focus();
    else if (again) again.focus();
  } catch (failure) {
    handleFailure(failure);
  } finally {
    console_.rendering = false;
    const again = console_.again;
    console_.again = null;
    if (again) refresh(again);
  }
}

function followUp(seen) {
  const follow = console_.follow;
  const result = follow.done(seen);
  if (result || Date.now() > follow.until) {
    console_.follow = null;
    if (result) notify(result);
    return;
  }
  setTimeout(() => refresh(), FOLLOW_EVERY_MS);
}

export function handleFailure(failure) {
  if (failure instanceof KeyRefused) {
    signOut("The key or token was refused (401): it may have expired. Sign in again.");
    return;
  }
  const text = failure instanceof ApiFailed ? failure.message
    : `The app could not be reached: ${failure.message}`;
  document.getElementById("problem").textContent = text; // replaced, never piled up
}

function showSignIn(error) {
  console_.shownHash = null;
  document.getElementById("sign-out").hidden = true;
  document.getElementById("updated").textContent = "";
  document.getElementById("problem").textContent = "";
  notify("", "");
  setTrail();
  const view = document.getElementById("view");
  view.replaceChildren(/** @type {HTMLTemplateElement} */ (document.getElementById("sign-in-template")).content.cloneNode(true));
  document.getElementById("sign-in-error").textContent = error;
  document.getElementById("sign-in").addEventListener("submit", signIn);
  document.getElementById("key").focus();
}

// Who is signed in, and what they may do: the page hides what their role cannot (the API
// refuses it anyway). `data-role` on the body says which role's buttons show.
async function whoAmI() {
  console_.me = await consoleApi("me");
  document.body.dataset.role = console_.me.role || "none";
  const who = document.getElementById("who");
  who.textContent = `${console_.me.name} · ${console_.me.roleName}`;
  who.hidden = false;
}

async function signIn(event) {
  event.preventDefault();
  console_.key = /** @type {HTMLInputElement} */ (document.getElementById("key")).value.trim();
  try {
    await whoAmI(); // proves the key or token before it is kept
  } catch (failure) {
    console_.key = null;
    console_.me = null;
    const text = failure instanceof KeyRefused
      ? "The key or token was refused (401). Check it and try again."
      : failure instanceof ApiFailed && failure.status === 403
        ? "You are signed in, but have no role in this service: ask its administrator for one."
        : `Could not sign in: ${failure.message}`;
    document.getElementById("sign-in-error").textContent = text;
    return;
  }
  sessionStorage.setItem(KEY_ITEM, console_.key);
  await refresh({ moveFocus: true });
}

// Signed in through the platform, forgetting is not enough: its session cookie would sign the
// caller straight back in. The platform's own sign-out ends that session, then comes back here.
function signOutClicked() {
  if (console_.key !== PLATFORM) return signOut();
  location.assign(`/.auth/logout?post_logout_redirect_uri=${encodeURIComponent("/console")}`);
}

function signOut(error = "") {
  console_.key = null;
  console_.me = null;
  delete document.body.dataset.role;
  document.getElementById("who").hidden = true;
  sessionStorage.removeItem(KEY_ITEM);
  showSignIn(error);
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("sign-out").addEventListener("click", signOutClicked);
  window.addEventListener("hashchange", () => {
    notify(console_.pendingNotice || "", console_.pendingNotice ? "done" : "");
    console_.pendingNotice = null;
    refresh({ moveFocus: true });
  });
  setInterval(() => {
    const busy = document.hidden || /** @type {HTMLDialogElement} */ (document.getElementById("confirm")).open ||
      (document.activeElement && document.activeElement.tagName === "SELECT");
    if (console_.key && !busy) refresh();
  }, REFRESH_EVERY_MS);
  refresh();
  startSession();
});

// Signed in through the platform (in Azure, with App Service Authentication), the session
// cookie already says who is calling: the sign-in form, shown meanwhile, gives way.
async function startSession() {
  if (console_.key) return;
  try {
    await consoleApi("me"); // without a key or token: only the platform's session passes
  } catch {
    return; // none: the sign-in form stays
  }
  if (console_.key) return; // signed in meanwhile
  console_.key = PLATFORM;
  await refresh({ moveFocus: true });
}
