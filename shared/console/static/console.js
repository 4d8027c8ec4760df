// The Scheduler console: plain JavaScript, no build step, nothing loaded from elsewhere.
// It reads through /console/api/* and changes things through the management API itself, with
// the function key the user typed (kept in sessionStorage: this tab only).
"use strict";

const KEY_ITEM = "scheduler-console-key";
const API_VERSION = "2016-03-01";
const REFRESH_EVERY_MS = 10000;
const HISTORY_SHOWN = 50;
const HISTORY_STATUSES = ["Completed", "Failed", "Postponed"];

const console_ = {
  key: sessionStorage.getItem(KEY_ITEM),
  historyStatus: "",
  rendering: false,
};

// --- talking to the app ------------------------------------------------------------------

class KeyRefused extends Error {}

class ApiFailed extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function call(method, path, query = {}) {
  const url = new URL(path, location.origin);
  for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value);
  const response = await fetch(url, {
    method,
    headers: { "x-functions-key": console_.key || "" },
    cache: "no-store",
  });
  if (response.status === 401) throw new KeyRefused();
  const text = await response.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!response.ok) {
    const message = body && body.error ? body.error.message : `The app answered ${response.status}.`;
    throw new ApiFailed(response.status, message);
  }
  return body;
}

const consoleApi = (path) => call("GET", `/console/api/${path}`);
const arm = (method, resourceId, suffix = "", query = {}) =>
  call(method, resourceId + suffix, { "api-version": API_VERSION, ...query });

function collectionPath(c) {
  return ["collections", c.subscription, c.resourceGroup, c.name].map(encodeURIComponent).join("/");
}

// --- building the page -------------------------------------------------------------------

// Elements are built with text nodes only: nothing the app returns is ever parsed as HTML.
function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === false || value === null || value === undefined) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "class") element.className = value;
    else element.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

function exactTime(iso) {
  // "2026-12-01T02:30:19.5Z" -> "2026-12-01 02:30:19 UTC": to the second, as runs are recorded.
  return iso.replace("T", " ").replace(/(\.\d+)?(Z|\+00:00)$/, "") + " UTC";
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

function when(iso) {
  if (!iso) return h("span", { class: "empty" }, "none");
  return h("time", { class: "when", datetime: iso, title: iso }, exactTime(iso),
    h("small", {}, relativeTime(iso)));
}

function badge(text) {
  return h("span", { class: `badge ${text}` }, text);
}

// A job's state, with the reason a client gave when it set it (the classic API's stateDetails).
function jobState(job) {
  if (!job.stateReason) return badge(job.state);
  return h("span", { class: "state" }, badge(job.state), " ",
    h("small", { class: "reason" }, job.stateReason));
}

function cell(label, ...content) {
  return h("td", { "data-label": label }, ...content);
}

function table(headings, rows, emptyText) {
  if (rows.length === 0) return h("p", { class: "empty" }, emptyText);
  return h("table", { class: "cards" },
    h("thead", {}, h("tr", {}, headings.map((text) => h("th", { scope: "col" }, text)))),
    h("tbody", {}, rows));
}

function announce(text) {
  document.getElementById("announce").textContent = text;
}

function setTrail(...steps) {
  const trail = document.getElementById("trail");
  trail.replaceChildren(...steps.map(([text, href]) => h("li", {}, href ? h("a", { href }, text) : text)));
}

// --- actions ---------------------------------------------------------------------------

function actionButton(text, focusKey, work, extra = {}) {
  return h("button", {
    type: "button",
    "data-focus": focusKey,
    ...extra,
    onclick: async (event) => {
      const button = event.currentTarget;
      button.disabled = true;
      try {
        const done = await work();
        if (done) announce(done);
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
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent =
    `Delete ${what}? Its history goes with it; this cannot be undone.`;
  document.getElementById("confirm-button").textContent = `Delete ${what}`;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "confirm"), { once: true });
  });
}

function jobActions(job) {
  const enabled = job.state === "enabled";
  return h("div", { class: "actions" },
    actionButton("Run now", `run:${job.id}`, async () => {
      await arm("POST", job.id, "/run");
      return `${job.name} will run now.`;
    }, { "aria-label": `Run ${job.name} now` }),
    actionButton(enabled ? "Disable" : "Enable", `state:${job.id}`, async () => {
      const state = enabled ? "Disabled" : "Enabled";
      await patchJobState(job.id, state);
      return `${job.name} is ${state.toLowerCase()}.`;
    }, { "aria-label": `${enabled ? "Disable" : "Enable"} ${job.name}` }),
    actionButton("Delete", `delete:${job.id}`, async () => {
      if (!(await confirmDelete(`job ${job.name}`))) return null;
      await arm("DELETE", job.id);
      if (location.hash.includes("/jobs/")) location.hash = location.hash.replace(/\/jobs\/[^/]+$/, "");
      return `${job.name} was deleted.`;
    }, { class: "danger", "aria-label": `Delete ${job.name}` }));
}

async function patchJobState(jobId, state) {
  const url = new URL(jobId, location.origin);
  url.searchParams.set("api-version", API_VERSION);
  const response = await fetch(url, {
    method: "PATCH",
    headers: { "x-functions-key": console_.key, "Content-Type": "application/json" },
    body: JSON.stringify({ properties: { state } }),
  });
  if (response.status === 401) throw new KeyRefused();
  if (!response.ok) {
    const body = await response.json().catch(() => null);
    throw new ApiFailed(response.status, body && body.error ? body.error.message : `HTTP ${response.status}`);
  }
}

function collectionActions(collection) {
  const enabled = collection.state === "Enabled";
  return actionButton(enabled ? "Disable" : "Enable", `collection:${collection.id}`, async () => {
    await arm("POST", collection.id, enabled ? "/disable" : "/enable");
    return `Collection ${collection.name} is ${enabled ? "disabled" : "enabled"}.`;
  }, { "aria-label": `${enabled ? "Disable" : "Enable"} collection ${collection.name}` });
}

// --- the views -------------------------------------------------------------------------

async function overview() {
  const { value: collections } = await consoleApi("collections");
  setTrail(["Job collections"]);
  const rows = collections.map((c) => h("tr", {},
    cell("Collection", h("a", { href: `#/${collectionPath(c)}`, "data-focus": `open:${c.id}` }, c.name)),
    cell("Resource group", c.resourceGroup),
    cell("Subscription", h("span", { class: "mono" }, c.subscription)),
    cell("Location", c.location || ""),
    cell("Plan", c.sku),
    cell("State", badge(c.state)),
    cell("Jobs", `${c.jobs.total} (${c.jobs.enabled} enabled, ${c.jobs.disabled} disabled, ` +
      `${c.jobs.completed} completed, ${c.jobs.faulted} faulted)`),
    cell("Actions", collectionActions(c))));
  return [
    h("h1", {}, "Job collections"),
    table(["Collection", "Resource group", "Subscription", "Location", "Plan", "State", "Jobs", ""],
      rows, "No job collections yet. Create one with the management API (see README)."),
  ];
}

async function collectionView(subscription, group, name) {
  const path = [subscription, group, name].map(encodeURIComponent).join("/");
  const { collection, jobs, timeline } = await consoleApi(`collections/${path}`);
  setTrail(["Job collections", "#/"], [collection.name]);
  const rows = jobs.map((job) => h("tr", {},
    cell("Job", h("a", { href: `#/collections/${path}/jobs/${encodeURIComponent(job.name)}`,
      "data-focus": `open:${job.id}` }, job.name)),
    cell("State", jobState(job)),
    cell("Schedule", job.schedule),
    cell("Action", job.action),
    cell("Next run", when(job.nextRun)),
    cell("Last run", lastRun(job.lastRun)),
    h("td", { class: "number", "data-label": "Runs / failures / faulted" },
      `${job.counts.executions} / ${job.counts.failures} / ${job.counts.faulted}`),
    cell("Actions", jobActions(job))));
  return [
    h("h1", {}, `Collection ${collection.name}`),
    h("dl", { class: "facts" },
      h("dt", {}, "State"), h("dd", {}, badge(collection.state), " ", collectionActions(collection)),
      h("dt", {}, "Plan"), h("dd", {}, collection.sku),
      h("dt", {}, "Resource group"), h("dd", {}, collection.resourceGroup),
      h("dt", {}, "Location"), h("dd", {}, collection.location || ""),
      h("dt", {}, "Jobs"), h("dd", {}, `${collection.jobs.total}` +
        (collection.quota.maxJobCount ? ` of at most ${collection.quota.maxJobCount}` : ""))),
    h("h2", {}, "Jobs"),
    table(["Job", "State", "Schedule", "Action", "Next run", "Last run", "Runs / failures / faulted", ""],
      rows, "No jobs in this collection."),
    h("h2", { id: "timeline-title" }, "Next 24 hours"),
    timelineView(timeline),
  ];
}

function lastRun(last) {
  if (!last) return h("span", { class: "empty" }, "never");
  const retry = last.retryCount ? `, retry ${last.retryCount}` : "";
  const action = last.actionName === "ErrorAction" ? " (errorAction)" : "";
  return h("span", {}, when(last.startTime), badge(last.status), action + retry);
}

function timelineView(timeline) {
  const start = Date.parse(timeline.from);
  const span = Date.parse(timeline.until) - start;
  if (timeline.jobs.length === 0) {
    return h("p", { class: "empty" }, "No enabled jobs: nothing runs in the next 24 hours.");
  }
  const hours = [0, 6, 12, 18, 24].map((offset) =>
    exactTime(new Date(start + offset * 3600000).toISOString()).slice(11, 16));
  return h("figure", { class: "timeline", "aria-labelledby": "timeline-title" },
    h("div", { class: "axis", "aria-hidden": "true" }, hours.map((text) => h("span", {}, text))),
    timeline.jobs.map((row) => {
      const marks = row.runs.map((iso) => h("span", {
        class: "run", title: exactTime(iso),
        "data-at": String(((Date.parse(iso) - start) / span) * 100),
      }));
      const words = row.runs.length === 0 ? "no runs"
        : `${row.runs.length}${row.more ? "+" : ""} run${row.runs.length === 1 ? "" : "s"}, ` +
          `first at ${exactTime(row.runs[0])}`;
      const track = h("div", { class: "track", role: "img", "aria-label": `${row.name}: ${words}` }, marks);
      if (row.more) {
        const last = row.runs[row.runs.length - 1];
        track.append(h("span", { class: "busy", "data-from": String(((Date.parse(last) - start) / span) * 100) }));
      }
      return h("div", { class: "row" }, h("span", {}, row.name), track);
    }));
}

// Positions are set through the CSS object model: the content security policy allows no
// inline style attributes.
function placeMarks(root) {
  for (const mark of root.querySelectorAll(".run[data-at]")) mark.style.left = `${mark.dataset.at}%`;
  for (const bar of root.querySelectorAll(".busy[data-from]")) bar.style.left = `${bar.dataset.from}%`;
}

async function jobView(subscription, group, name, jobName) {
  const path = [subscription, group, name, "jobs", jobName].map(encodeURIComponent).join("/");
  const job = await consoleApi(`collections/${path}`);
  const query = { $top: String(HISTORY_SHOWN) };
  if (console_.historyStatus) query.$filter = `status eq ${console_.historyStatus}`;
  const { value: history } = await arm("GET", job.id, "/history", query);
  const collectionHref = `#/collections/${[subscription, group, name].map(encodeURIComponent).join("/")}`;
  setTrail(["Job collections", "#/"], [name, collectionHref], [job.name]);
  const filter = h("select", {
    id: "history-status",
    onchange: (event) => { console_.historyStatus = event.target.value; refresh(); },
  }, h("option", { value: "" }, "All"), HISTORY_STATUSES.map((status) =>
    h("option", { value: status, selected: status === console_.historyStatus }, status)));
  const rows = history.map(({ properties: entry }) => h("tr", {},
    cell("Expected", when(entry.expectedExecutionTime)),
    cell("Started", when(entry.startTime)),
    cell("Action", entry.actionName === "ErrorAction" ? "errorAction" : "action"),
    cell("Status", badge(entry.status)),
    h("td", { class: "number", "data-label": "Retry" }, String(entry.retryCount)),
    h("td", { class: "number", "data-label": "Occurrence" }, String(entry.repeatCount)),
    cell("Message", message(entry.message || ""))));
  return [
    h("h1", {}, `Job ${job.name}`),
    h("dl", { class: "facts" },
      h("dt", {}, "State"), h("dd", {}, jobState(job)),
      h("dt", {}, "Schedule"), h("dd", {}, job.schedule),
      h("dt", {}, "Action"), h("dd", {}, job.action),
      h("dt", {}, "Next run"), h("dd", {}, when(job.nextRun)),
      h("dt", {}, "Last run"), h("dd", {}, lastRun(job.lastRun)),
      h("dt", {}, "Runs"), h("dd", {},
        `${job.counts.executions} runs, ${job.counts.failures} failed, ${job.counts.faulted} faulted`)),
    jobActions(job),
    h("h2", {}, job.state === "enabled" ? "Next occurrences" : "Next occurrences, if enabled"),
    job.nextOccurrences.length
      ? h("ol", { class: "occurrences" }, job.nextOccurrences.map((iso) => h("li", {}, when(iso))))
      : h("p", { class: "empty" }, "None: the schedule has no more occurrences."),
    h("h2", {}, "History"),
    h("div", { class: "filter" }, h("label", { for: "history-status" }, "Status"), filter),
    table(["Expected", "Started", "Action", "Status", "Retry", "Occurrence", "Message"],
      rows, "No history yet."),
    h("h2", {}, "Definition"),
    h("p", { class: "empty" }, "Secrets (passwords, keys, tokens, certificates) are never shown."),
    h("pre", { class: "definition" }, JSON.stringify(job.definition, null, 2)),
  ];
}

function message(text) {
  const firstLine = text.split("\n", 1)[0];
  if (firstLine.length <= 100 && firstLine === text) return text;
  return h("details", {}, h("summary", {}, firstLine.slice(0, 100) || "(details)"), h("pre", {}, text));
}

// --- routing, refreshing, signing in -----------------------------------------------------

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "collections" && parts.length === 4) return () => collectionView(parts[1], parts[2], parts[3]);
  if (parts[0] === "collections" && parts.length === 6 && parts[4] === "jobs") {
    return () => jobView(parts[1], parts[2], parts[3], parts[5]);
  }
  return overview;
}

async function refresh({ moveFocus = false } = {}) {
  if (!console_.key) return showSignIn("");
  if (console_.rendering) return;
  console_.rendering = true;
  const view = document.getElementById("view");
  // A refresh rebuilds the page: keep the keyboard where it was (same control, by its key).
  const focused = document.activeElement && document.activeElement.dataset
    ? document.activeElement.dataset.focus || document.activeElement.id : null;
  try {
    const content = await route()();
    view.replaceChildren(...content);
    placeMarks(view);
    document.getElementById("sign-out").hidden = false;
    document.getElementById("updated").textContent =
      `Updated ${exactTime(new Date().toISOString()).slice(11)}`;
    const again = focused && (view.querySelector(`[data-focus="${CSS.escape(focused)}"]`) ||
      document.getElementById(focused));
    if (moveFocus) view.focus();
    else if (again) again.focus();
  } catch (failure) {
    handleFailure(failure);
  } finally {
    console_.rendering = false;
  }
}

function handleFailure(failure) {
  if (failure instanceof KeyRefused) {
    signOut("The function key was refused (401). Check it and sign in again.");
  } else if (failure instanceof ApiFailed) {
    announce(failure.message);
    const view = document.getElementById("view");
    view.prepend(h("p", { class: "error", role: "alert" }, failure.message));
  } else {
    announce(`The app could not be reached: ${failure.message}`);
    document.getElementById("view").prepend(
      h("p", { class: "error", role: "alert" }, `The app could not be reached: ${failure.message}`));
  }
}

function showSignIn(error) {
  document.getElementById("sign-out").hidden = true;
  document.getElementById("updated").textContent = "";
  setTrail();
  const view = document.getElementById("view");
  view.replaceChildren(document.getElementById("sign-in-template").content.cloneNode(true));
  document.getElementById("sign-in-error").textContent = error;
  document.getElementById("sign-in").addEventListener("submit", signIn);
  document.getElementById("key").focus();
}

async function signIn(event) {
  event.preventDefault();
  console_.key = document.getElementById("key").value.trim();
  try {
    await consoleApi("collections"); // proves the key before it is kept
  } catch (failure) {
    console_.key = null;
    const text = failure instanceof KeyRefused
      ? "The function key was refused (401). Check it and try again."
      : `Could not sign in: ${failure.message}`;
    document.getElementById("sign-in-error").textContent = text;
    return;
  }
  sessionStorage.setItem(KEY_ITEM, console_.key);
  await refresh({ moveFocus: true });
}

function signOut(error = "") {
  console_.key = null;
  sessionStorage.removeItem(KEY_ITEM);
  showSignIn(error);
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("sign-out").addEventListener("click", () => signOut());
  window.addEventListener("hashchange", () => refresh({ moveFocus: true }));
  setInterval(() => {
    const busy = document.hidden || document.getElementById("confirm").open ||
      (document.activeElement && document.activeElement.tagName === "SELECT");
    if (console_.key && !busy) refresh();
  }, REFRESH_EVERY_MS);
  refresh();
});
