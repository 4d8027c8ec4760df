// @ts-check
// The console's forms: a job (every part of it, with a live preview of its runs) and a job
// collection. Each form edits a JSON model, which its JSON view shows whole; a field writes one
// path of the model. Imports console.js's helpers (h, arm, when, ...), used only once a form
// is built, so that the two modules' import of each other is harmless.
import { ApiFailed, KeyRefused, PREVIEW_COUNT, PREVIEW_DELAY_MS, arm, collectionId, collectionPath, consoleApi, encoded, h, handleFailure, jobPath, message, navigate, on, when } from "./console.js";
import { excludedItems, exclusionFields } from "./exclusions.js";


const ACTION_TYPES = ["Https", "Http", "StorageQueue", "ServiceBusQueue", "ServiceBusTopic"];
const ACTION_TYPE_WORDS = {
  Https: "HTTPS request", Http: "HTTP request", StorageQueue: "Storage queue message",
  ServiceBusQueue: "Service Bus queue message", ServiceBusTopic: "Service Bus topic message",
};
const MESSAGE_OF = {
  Http: "request", Https: "request", StorageQueue: "queueMessage",
  ServiceBusQueue: "serviceBusQueueMessage", ServiceBusTopic: "serviceBusTopicMessage",
};
const HTTP_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"];
const HTTP_AUTHENTICATIONS = {
  "": "None", Basic: "Basic (user name and password)", ClientCertificate: "Client certificate",
  ActiveDirectoryOAuth: "Microsoft Entra ID (OAuth client secret)",
  ManagedServiceIdentity: "The app's managed identity",
};
const FREQUENCIES = ["Minute", "Hour", "Day", "Week", "Month"];
export const WEEK_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const TIME_ZONES = ["UTC", "Europe/London", "Europe/Berlin", "America/New_York", "America/Los_Angeles",
  "Asia/Tokyo", "Australia/Sydney", "W. Europe Standard Time", "Pacific Standard Time"];
// Where each secret lives in an action (a read leaves them out; the form never shows them).
const SECRET_PLACES = [
  ["request", "authentication", "password"], ["request", "authentication", "pfx"],
  ["request", "authentication", "secret"], ["queueMessage", "sasToken"],
  ["serviceBusQueueMessage", "authentication", "sasKey"],
  ["serviceBusTopicMessage", "authentication", "sasKey"],
];
const ACTION_PLACES = [["action"], ["action", "errorAction"]];
// What stands in for a kept secret in a preview (which saves nothing) so that the rest of the
// body is checked; the problems such a stand-in causes are not shown.
const STAND_IN = { password: "kept", secret: "kept", sasKey: "kept", sasToken: "sv=2020&sig=kept" };
// What stands in for an action that is not right yet, so that a schedule previews on its own.
const STAND_IN_ACTION = { type: "Https", request: { uri: "https://example.com/", method: "GET" } };
const aboutTheAction = (detail) => /^properties\.action(\.|$)/.test(detail.target || "");

// --- wall times in a time zone (the date-time pickers) --------------------------------------

// Whether the browser knows `zone` (IANA names; Windows names such as "W. Europe Standard
// Time" are the API's, not the browser's).
function browserKnows(zone) {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

// How far `zone`'s wall clock is ahead of UTC at the instant `ms`, in milliseconds.
function zoneOffsetMs(zone, ms) {
  const parts = new Intl.DateTimeFormat("en-US", { timeZone: zone, hourCycle: "h23", year: "numeric",
    month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" }).formatToParts(new Date(ms));
  const part = (type) => Number(parts.find((each) => each.type === type).value);
  const wall = Date.UTC(part("year"), part("month") - 1, part("day"), part("hour"), part("minute"), part("second"));
  return wall - Math.floor(ms / 1000) * 1000;
}

// The wall time "YYYY-MM-DDTHH:MM:SS" of instant `ms` in `zone`.
function wallTimeOf(ms, zone) {
  return new Date(ms + zoneOffsetMs(zone, ms)).toISOString().slice(0, 19);
}

// The instant that wall time `wall` ("YYYY-MM-DDTHH:MM[:SS]") is in `zone`, written as the API
// reads it: with the zone's offset then ("+01:00"), or "Z" in UTC. Twice round, so that a wall
// time just across a change of offset takes the offset it is in.
function instantText(wall, zone) {
  const asUtc = Date.parse(`${wall.length === 16 ? `${wall}:00` : wall}Z`);
  if (Number.isNaN(asUtc)) return wall;
  let ms = asUtc - zoneOffsetMs(zone, asUtc);
  ms = asUtc - zoneOffsetMs(zone, ms);
  const offset = zoneOffsetMs(zone, ms) / 60000;
  if (offset === 0) return `${wallTimeOf(ms, zone)}Z`;
  const sign = offset < 0 ? "-" : "+";
  const whole = Math.abs(offset);
  return `${wallTimeOf(ms, zone)}${sign}${String(Math.floor(whole / 60)).padStart(2, "0")}:${String(whole % 60).padStart(2, "0")}`;
}

// An instant the API would read from `text` (no offset: UTC, as the API reads it), or NaN.
function instantOf(text) {
  if (typeof text !== "string" || !text.trim()) return NaN;
  return Date.parse(/(Z|[+-]\d\d:?\d\d)$/i.test(text.trim()) ? text.trim() : `${text.trim()}Z`);
}

// --- the model -------------------------------------------------------------------------

const clone = (value) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));
export const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

export function getAt(model, path) {
  return path.reduce((node, part) => (isObject(node) ? node[part] : undefined), model);
}

// Sets (or, for undefined, removes) the value at `path`; objects left empty go with it.
export function setAt(model, path, value) {
  let node = model;
  for (const part of path.slice(0, -1)) {
    if (!isObject(node[part])) node[part] = {};
    node = node[part];
  }
  const last = path[path.length - 1];
  if (value === undefined) delete node[last];
  else node[last] = value;
  for (let depth = path.length - 1; depth > 0 && value === undefined; depth -= 1) {
    const parent = getAt(model, path.slice(0, depth));
    if (isObject(parent) && Object.keys(parent).length === 0) setAt(model, path.slice(0, depth), undefined);
    else break;
  }
}

// The JSON merge patch (RFC 7396) from `before` to `after`: what a PATCH sends.
function mergePatch(before, after) {
  const patch = {};
  for (const key of Object.keys(before)) if (!(key in after)) patch[key] = null;
  for (const [key, value] of Object.entries(after)) {
    const old = before[key];
    if (isObject(value) && isObject(old)) {
      const inner = mergePatch(old, value);
      if (Object.keys(inner).length) patch[key] = inner;
    } else if (JSON.stringify(value) !== JSON.stringify(old)) {
      patch[key] = value;
    }
  }
  return patch;
}

// How a field's text becomes a value of the model, and back.
const KINDS = {
  text: { read: (text) => (text === "" ? undefined : text), show: (value) => value ?? "" },
  number: {
    read: (text) => (text.trim() === "" ? undefined : /^-?\d+$/.test(text.trim()) ? Number(text) : text),
    show: (value) => (value === undefined ? "" : String(value)),
  },
  numbers: { // "0, 30" <-> [0, 30]; what is not a number is sent as typed, for the API to name
    read: (text) => {
      const items = text.split(",").map((item) => item.trim()).filter(Boolean);
      return items.length ? items.map((item) => (/^-?\d+$/.test(item) ? Number(item) : item)) : undefined;
    },
    show: (value) => (Array.isArray(value) ? value.join(", ") : ""),
  },
  headers: { // "Name: value" lines <-> {"Name": "value"}
    read: (text) => {
      const headers = {};
      for (const line of text.split("\n")) {
        const at = line.indexOf(":");
        if (line.trim()) headers[(at < 0 ? line : line.slice(0, at)).trim()] = at < 0 ? "" : line.slice(at + 1).trim();
      }
      return Object.keys(headers).length ? headers : undefined;
    },
    show: (value) => (isObject(value) ? Object.entries(value).map(([name, v]) => `${name}: ${v}`).join("\n") : ""),
  },
};

// --- fields ------------------------------------------------------------------------------

// A form: its model, its fields by path (for the API's messages), and what to do on a change.
class Form {
  constructor(model, changed) {
    this.model = model;
    this.changed = changed; // (structural: bool) -> void
    this.fields = new Map();
    this.touched = new Set(); // the fields the user changed: a preview marks only their problems
    this.zoned = []; // the date-time pickers, redrawn when the job's time zone changes
  }

  // A labelled control for the model's `path`, with room for its help and its error.
  field(label, path, { kind = "text", control = "input", options = null, help = null,
    structural = false, inputType = "text", list = null, placeholder = null, required = false } = {}) {
    const id = `f-${path.join("-")}`;
    const converter = KINDS[kind];
    const value = getAt(this.model, path);
    const describedBy = [help ? `${id}-help` : null, `${id}-error`].filter(Boolean).join(" ");
    let element;
    const write = (event) => {
      this.touched.add(path.join("."));
      setAt(this.model, path, converter.read(event.target.value));
      this.changed(structural);
    };
    if (control === "select") {
      const current = String(value ?? "");
      const chosen = Object.keys(options).find((option) => option.toLowerCase() === current.toLowerCase()) ?? current;
      element = h("select", { id, "aria-describedby": describedBy, onchange: write },
        Object.entries(options).map(([option, words]) => h("option", { value: option, selected: option === chosen }, words)));
    } else if (control === "textarea") {
      element = h("textarea", { id, rows: "3", "aria-describedby": describedBy, spellcheck: "false", oninput: write });
      element.value = converter.show(value);
    } else {
      element = h("input", { id, type: inputType, list, placeholder, required, spellcheck: "false",
        autocomplete: "off", "aria-describedby": describedBy, oninput: write });
      element.value = converter.show(value);
    }
    return this.wrap(id, label, path, element, help);
  }

  wrap(id, label, path, element, help) {
    const error = h("p", { id: `${id}-error`, class: "field-error" });
    this.fields.set(path.join("."), { element, error });
    return h("div", { class: "field" }, h("label", { for: id }, label), element,
      help ? h("p", { id: `${id}-help`, class: "help" }, help) : null, error);
  }

  // A date and time picked on the wall clock of `zone` (an IANA name, or null for UTC): the
  // model keeps the instant, with the zone's offset, as the API reads it.
  // A change of the zone redraws it in place (`rezone`): the same instant on the new clock.
  dateTime(label, path, zone, help) {
    const id = `f-${path.join("-")}`;
    let shownZone = "UTC";
    const element = h("input", { id, type: "datetime-local", step: "1", "aria-describedby": `${id}-help ${id}-error`,
      oninput: (event) => {
        this.touched.add(path.join("."));
        setAt(this.model, path, event.target.value ? instantText(event.target.value, shownZone) : undefined);
        this.changed(false);
      } });
    const wrapped = this.wrap(id, label, path, element, help);
    const labelOf = wrapped.querySelector("label");
    const helpOf = wrapped.querySelector(".help");
    const draw = (newZone) => {
      shownZone = newZone && browserKnows(newZone) ? newZone : "UTC";
      const instant = instantOf(getAt(this.model, path));
      if (document.activeElement !== element) element.value = Number.isNaN(instant) ? "" : wallTimeOf(instant, shownZone);
      labelOf.textContent = `${label} (${shownZone})`;
      helpOf.textContent = `${newZone && shownZone !== newZone
        ? `In UTC: this browser does not know the time zone ${newZone}.` : `In ${shownZone}, the job's time zone.`} ${help}`;
    };
    draw(zone);
    this.zoned.push(draw);
    return wrapped;
  }

  rezone(zone) {
    for (const draw of this.zoned) draw(zone);
  }

  // A write-only field: empty, it keeps what is stored (`kept`); typed, it replaces it.
  secret(label, path, kept, help) {
    const id = `f-${path.join("-")}`;
    const words = kept ? `Stored and never shown: leave empty to keep it, or type a new one. ${help}` : help;
    const element = h("input", { id, type: "password", autocomplete: "new-password", spellcheck: "false",
      placeholder: kept ? "•••••• (kept)" : null, "aria-describedby": `${id}-help ${id}-error`,
      oninput: (event) => {
        this.touched.add(path.join("."));
        setAt(this.model, path, KINDS.text.read(event.target.value));
        this.changed(false);
      } });
    element.value = getAt(this.model, path) ?? "";
    return this.wrap(id, label, path, element, words);
  }

  checkboxes(legend, path, choices) {
    const chosen = new Set((getAt(this.model, path) || []).map((item) => String(item).toLowerCase()));
    const id = `f-${path.join("-")}`;
    const boxes = choices.map((choice) => h("label", { class: "check" }, h("input", {
      type: "checkbox", value: choice, checked: chosen.has(choice.toLowerCase()),
      onchange: (event) => {
        const group = event.target.closest("fieldset");
        const ticked = Array.from(group.querySelectorAll("input:checked")).map((box) => box.value);
        this.touched.add(path.join("."));
        setAt(this.model, path, ticked.length ? ticked : undefined);
        this.changed(false);
      },
    }), choice));
    const error = h("p", { id: `${id}-error`, class: "field-error" });
    const group = h("fieldset", { class: "field checks", id, "aria-describedby": `${id}-error` },
      h("legend", {}, legend), boxes, error);
    this.fields.set(path.join("."), { element: group, error });
    return group;
  }

  toggle(label, checked, change) {
    const id = `t-${label.replace(/\W+/g, "-").toLowerCase()}`;
    return h("div", { class: "field toggle" }, h("input", { id, type: "checkbox", checked,
      onchange: (event) => { change(event.target.checked); this.changed(true); } }), h("label", { for: id }, label));
  }

  // The field that shows a problem with `target` (a path in the model): its own, or the
  // nearest one above it ("" for none).
  placeOf(target) {
    let place = target;
    while (place && !this.fields.has(place)) place = place.includes(".") ? place.slice(0, place.lastIndexOf(".")) : "";
    return place;
  }

  // The API's problems beside the fields they name (`properties.action.request.uri`); those of
  // no field here are listed with the form's own message. Answers how many were shown.
  /**
   * @param {import("./console.js").ProblemDetail[]} details
   * @param {string} prefix the path this form's fields sit under
   * @param {Element} general the list for problems that name no field here
   * @param {(target: string) => boolean} [ignored]
   */
  showProblems(details, prefix, general, ignored = () => false) {
    this.clearProblems();
    const unplaced = [];
    let shown = 0;
    for (const detail of details) {
      const target = (detail.target || "").replace(/\[\d+\]/g, "").replace(prefix, "");
      if (ignored(target)) continue;
      shown += 1;
      const place = this.placeOf(target);
      const field = this.fields.get(place);
      if (!field) {
        unplaced.push(`${detail.target}: ${detail.message}`);
        continue;
      }
      const words = place === target ? detail.message : `${target.slice(place.length + 1)}: ${detail.message}`;
      field.error.textContent = field.error.textContent ? `${field.error.textContent}; ${words}` : words;
      field.element.setAttribute("aria-invalid", "true");
    }
    general.replaceChildren(...unplaced.map((text) => h("li", {}, text)));
    return shown;
  }

  clearProblems() {
    for (const { element, error } of this.fields.values()) {
      error.textContent = "";
      element.removeAttribute("aria-invalid");
    }
  }
}

// --- the job form ------------------------------------------------------------------------

function newJobModel() {
  return {
    action: { type: "Https", request: { method: "GET" } },
    recurrence: { frequency: "Hour", interval: 1 },
  };
}

export async function jobForm([subscription, group, name], jobName) {
  const collection = collectionId(subscription, group, name);
  const collectionHref = `#/collections/${encoded(subscription, group, name)}`;
  let original = null;
  if (jobName) {
    const job = await consoleApi(`collections/${encoded(subscription, group, name, "jobs", jobName)}`);
    original = clone(job.definition);
    delete original.status;
  } else {
    await arm("GET", collection); // a missing collection is the page's not-found
  }
  const editor = new JobEditor(collection, original, jobName);
  const trail = [["Job collections", "#/"], [name, collectionHref]];
  if (jobName) trail.push([jobName, `${collectionHref}/jobs/${encodeURIComponent(jobName)}`]);
  trail.push([jobName ? "Edit" : "New job"]);
  return { trail, content: editor.build(collectionHref) };
}

class JobEditor {
  constructor(collection, original, jobName) {
    this.collection = collection;
    this.original = original;
    this.jobName = jobName;
    this.form = new Form(original ? clone(original) : newJobModel(), (structural) => this.changed(structural));
    this.previewed = 0; // answers older than the latest question are dropped
    this.timer = null;
  }

  get model() {
    return this.form.model;
  }

  build(collectionHref) {
    const title = this.jobName ? `Edit job ${this.jobName}` : "New job";
    this.fieldsArea = h("div", { class: "form-fields" });
    this.json = h("textarea", { id: "job-json", class: "json", rows: "16", spellcheck: "false",
      "aria-describedby": "job-json-error", oninput: () => this.jsonTyped() });
    this.jsonError = h("p", { id: "job-json-error", class: "field-error" });
    this.problems = h("ul", { class: "form-problems error", role: "alert" });
    this.words = h("p", { class: "preview-words" });
    this.list = h("ol", { class: "occurrences" });
    this.excludedList = h("ul", { class: "occurrences excluded", "aria-label": "Runs the days off skip or move" });
    this.previewNote = h("p", { class: "help" });
    this.saveButton = h("button", { type: "submit", class: "primary" }, this.jobName ? "Save" : "Create job");
    this.renderFields();
    this.showJson();
    this.schedulePreview(0);
    return [
      h("h1", {}, title),
      h("form", { class: "editor", novalidate: true, onsubmit: (event) => { event.preventDefault(); this.save(); } },
        h("div", { class: "editor-main" },
          this.fieldsArea,
          h("details", { class: "json-view" },
            h("summary", {}, "JSON: the whole definition, with what the form has no field for"),
            h("label", { for: "job-json" }, "Job properties (JSON)"), this.json, this.jsonError),
          this.problems,
          h("div", { class: "actions" }, this.saveButton,
            h("a", { class: "button", href: this.jobName ? `${collectionHref}/jobs/${encodeURIComponent(this.jobName)}` : collectionHref }, "Cancel"))),
        h("section", { class: "preview", "aria-labelledby": "preview-title" },
          h("h2", { id: "preview-title" }, "Preview"),
          h("div", { "aria-live": "polite" }, this.words, this.previewNote),
          this.list, this.excludedList)),
    ];
  }

  // Rebuilds the fields from the model (after a change of what applies: an action's type...),
  // keeping the focus on the control that had it.
  renderFields() {
    const focused = document.activeElement && document.activeElement.id;
    const form = this.form;
    form.fields = new Map();
    form.zoned = [];
    const model = this.model;
    const recurring = isObject(model.recurrence);
    const sections = [
      h("fieldset", { class: "group" }, h("legend", {}, "Job"),
        this.jobName ? null : form.wrap("f-name", "Name", ["#name"], h("input", {
          id: "f-name", required: true, autocomplete: "off", spellcheck: "false", value: this.name || "",
          "aria-describedby": "f-name-help f-name-error", oninput: (event) => { this.name = event.target.value; },
        }), "Letters, digits, hyphens and underscores; it cannot be changed later."),
        form.field("State", ["state"], { control: "select", options: { enabled: "Enabled", disabled: "Disabled" } }),
        form.dateTime("Start time", ["startTime"], this.timeZone(),
          "When the schedule starts; empty: when the job is saved."),
        form.field("When a run is due while the previous one still runs", ["overlapPolicy"], {
          control: "select",
          options: { "": "Wait for it (default)", Wait: "Wait for it", Skip: "Skip the run", Allow: "Run alongside" },
        })),
      h("fieldset", { class: "group" }, h("legend", {}, "Schedule"),
        form.toggle("Repeats", recurring, (on) => {
          setAt(model, ["recurrence"], on ? { frequency: "Day", interval: 1 } : undefined);
        }),
        recurring ? this.recurrenceFields() : h("p", { class: "help" }, "Runs once, at the start time.")),
      this.actionFields(["action"], "Action"),
      h("fieldset", { class: "group" }, h("legend", {}, "If every try fails"),
        form.toggle("Run an error action", isObject(model.action.errorAction), (on) => {
          setAt(model, ["action", "errorAction"], on ? { type: "Https", request: { method: "POST" } } : undefined);
        }),
        isObject(model.action.errorAction) ? this.actionFields(["action", "errorAction"], "Error action", false) : null),
    ];
    this.fieldsArea.replaceChildren(...sections);
    const again = focused && document.getElementById(focused);
    if (again && this.fieldsArea.contains(again)) again.focus();
  }

  recurrenceFields() {
    const form = this.form;
    const at = (...path) => ["recurrence", ...path];
    return [
      h("div", { class: "row-fields" },
        form.field("Every", at("interval"), { kind: "number", inputType: "text", help: "How many of the unit below." }),
        form.field("Unit", at("frequency"), { control: "select", structural: true,
          options: Object.fromEntries(FREQUENCIES.map((unit) => [unit, unit.toLowerCase()])) })),
      h("div", { class: "row-fields" },
        form.field("At minutes", at("schedule", "minutes"), { kind: "numbers", help: "0 to 59, by commas: 0, 30" }),
        form.field("At hours", at("schedule", "hours"), { kind: "numbers", help: "0 to 23, by commas: 9, 17" })),
      form.checkboxes("On days of the week", at("schedule", "weekDays"), WEEK_DAYS),
      form.field("On days of the month", at("schedule", "monthDays"), { kind: "numbers",
        help: "1 to 31, or -1 for the last day. Monthly occurrences (the first Friday...) are set in the JSON." }),
      form.field("Time zone", at("timeZone"), { list: "time-zones",
        help: "The wall clock the hours and the start and end times follow: an IANA or Windows name; empty: UTC." }),
      h("datalist", { id: "time-zones" }, TIME_ZONES.map((zone) => h("option", { value: zone }))),
      h("div", { class: "row-fields" },
        form.field("Stop after this many runs", at("count"), { kind: "number" }),
        form.dateTime("End time", at("endTime"), this.timeZone(), "No run after it; empty: none.")),
      exclusionFields(this), // exclusions.js
    ];
  }

  // The fields of an action (the main one or the errorAction) of each type.
  actionFields(place, legend, withRetry = true) {
    const form = this.form;
    const action = getAt(this.model, place);
    const type = ACTION_TYPES.find((known) => known.toLowerCase() === String(action.type).toLowerCase()) || action.type;
    const typeSelect = form.field("Type", [...place, "type"], { control: "select", structural: true,
      options: Object.fromEntries(ACTION_TYPES.map((known) => [known, ACTION_TYPE_WORDS[known]])) });
    typeSelect.querySelector("select").handlers.change = (event) => {
      this.changeActionType(place, event.target.value);
      this.changed(true);
    };
    const message = [...place, MESSAGE_OF[type] || "request"];
    const parts = [h("legend", {}, legend), typeSelect];
    if (type === "Http" || type === "Https") parts.push(...this.httpFields(message));
    else if (type === "StorageQueue") parts.push(...this.storageQueueFields(message));
    else parts.push(...this.serviceBusFields(message, type));
    if (withRetry) parts.push(...this.retryFields([...place, "retryPolicy"]));
    return h("fieldset", { class: "group" }, ...parts);
  }

  changeActionType(place, type) {
    const action = getAt(this.model, place);
    const was = MESSAGE_OF[action.type] || MESSAGE_OF[ACTION_TYPES.find((t) => t.toLowerCase() === String(action.type).toLowerCase())];
    action.type = type;
    if (was !== MESSAGE_OF[type]) {
      delete action[was];
      action[MESSAGE_OF[type]] = type === "StorageQueue" ? {}
        : type.startsWith("ServiceBus") ? { authentication: { type: "SharedAccessKey" } } : { method: "GET" };
    }
  }

  httpFields(request) {
    const form = this.form;
    const auth = [...request, "authentication"];
    const authType = getAt(this.model, [...auth, "type"]) || "";
    const fields = [
      h("div", { class: "row-fields" },
        form.field("Method", [...request, "method"], { control: "select",
          options: Object.fromEntries(HTTP_METHODS.map((method) => [method, method])) }),
        form.field("URI", [...request, "uri"], { inputType: "url", required: true, placeholder: "https://example.org/hook",
          help: "Keys in it show as *** and are kept unless you change them." })),
      form.field("Headers", [...request, "headers"], { kind: "headers", control: "textarea",
        help: "One per line: Name: value." }),
      form.field("Body", [...request, "body"], { control: "textarea" }),
      form.field("Authentication", [...auth, "type"], { control: "select", structural: true, options: HTTP_AUTHENTICATIONS }),
    ];
    // Another type of authentication starts afresh: none of the old one's fields apply.
    fields[3].querySelector("select").handlers.change = (event) => {
      setAt(this.model, auth, event.target.value ? { type: event.target.value } : undefined);
      this.changed(true);
    };
    const kept = (field) => this.kept([...auth, field]);
    if (authType === "Basic") {
      fields.push(form.field("User name", [...auth, "username"]),
        form.secret("Password", [...auth, "password"], kept("password"), ""));
    } else if (authType === "ClientCertificate") {
      fields.push(form.secret("Certificate (PKCS #12, base64)", [...auth, "pfx"], kept("pfx"), "The .pfx file's bytes in base64."),
        form.secret("Certificate password", [...auth, "password"], kept("password"), ""));
    } else if (authType === "ActiveDirectoryOAuth") {
      fields.push(form.field("Tenant", [...auth, "tenant"]), form.field("Audience", [...auth, "audience"]),
        form.field("Client id", [...auth, "clientId"]),
        form.secret("Client secret", [...auth, "secret"], kept("secret"), ""));
    } else if (authType === "ManagedServiceIdentity") {
      fields.push(form.field("Audience", [...auth, "audience"]),
        form.field("Client id of a user-assigned identity", [...auth, "clientId"], { help: "Empty: the system-assigned identity." }));
    }
    return fields;
  }

  storageQueueFields(message) {
    const form = this.form;
    return [
      h("div", { class: "row-fields" },
        form.field("Storage account", [...message, "storageAccount"]),
        form.field("Queue", [...message, "queueName"])),
      form.secret("SAS token", [...message, "sasToken"], this.kept([...message, "sasToken"]), "Allowing to add messages."),
      form.field("Message", [...message, "message"], { control: "textarea" }),
    ];
  }

  serviceBusFields(message, type) {
    const form = this.form;
    const entity = type === "ServiceBusTopic" ? ["Topic", "topicPath"] : ["Queue", "queueName"];
    return [
      h("div", { class: "row-fields" },
        form.field("Namespace", [...message, "namespace"], { help: "Its name, without .servicebus.windows.net." }),
        form.field(entity[0], [...message, entity[1]])),
      h("div", { class: "row-fields" },
        form.field("Key name", [...message, "authentication", "sasKeyName"]),
        form.secret("Key", [...message, "authentication", "sasKey"], this.kept([...message, "authentication", "sasKey"]), "")),
      form.field("Transport", [...message, "transportType"], { control: "select",
        options: { "": "Default", netMessaging: "NetMessaging", amqp: "AMQP" } }),
      form.field("Message", [...message, "message"], { control: "textarea",
        help: "Message properties are set in the JSON (brokeredMessageProperties, customMessageProperties)." }),
    ];
  }

  retryFields(policy) {
    const form = this.form;
    return [
      form.field("Retries", [...policy, "retryType"], { control: "select", structural: true,
        options: { "": "Default (4 retries, 30 s apart)", None: "None", Fixed: "Fixed interval", Exponential: "Exponential" } }),
      h("div", { class: "row-fields" },
        form.field("Retry interval", [...policy, "retryInterval"], { placeholder: "PT30S", help: "An ISO 8601 duration: PT30S, PT5M." }),
        form.field("Retry count", [...policy, "retryCount"], { kind: "number" })),
    ];
  }

  // Whether a secret is stored for this place: the job had the same kind of object there.
  kept(path) {
    if (!this.original) return false;
    const parent = path.slice(0, -1);
    const before = getAt(this.original, parent);
    const now = getAt(this.model, parent);
    if (!isObject(before) || !isObject(now)) return false;
    const typeOf = (object) => String(object.type || "").toLowerCase();
    return typeOf(before) === typeOf(now);
  }

  // The job's time zone as written (null: UTC), which its start and end times are shown in.
  timeZone() {
    const zone = getAt(this.model, ["recurrence", "timeZone"]);
    return typeof zone === "string" && zone.trim() ? zone.trim() : null;
  }

  // Secret places (whole paths) that keep their stored value: kept and not typed again.
  keptSecrets() {
    const found = [];
    for (const action of ACTION_PLACES) {
      for (const place of SECRET_PLACES) {
        const path = [...action, ...place];
        if (getAt(this.model, path) === undefined && this.kept(path)) found.push(path);
      }
    }
    return found;
  }

  changed(structural) {
    if (structural) this.renderFields();
    else this.form.rezone(this.timeZone());
    this.showJson();
    this.schedulePreview(PREVIEW_DELAY_MS);
  }

  showJson() {
    if (document.activeElement !== this.json) this.json.value = JSON.stringify(this.model, null, 2);
  }

  jsonTyped() {
    let parsed;
    try {
      parsed = JSON.parse(this.json.value);
    } catch (problem) {
      this.jsonError.textContent = `Not JSON yet: ${problem.message}`;
      return;
    }
    if (!isObject(parsed) || !isObject(parsed.action)) {
      this.jsonError.textContent = "The properties of a job: an object with an action.";
      return;
    }
    this.jsonError.textContent = "";
    this.form.model = parsed;
    this.renderFields();
    for (const place of this.form.fields.keys()) this.form.touched.add(place); // typed, in JSON
    this.schedulePreview(PREVIEW_DELAY_MS);
  }

  schedulePreview(delay) {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.preview(), delay);
  }

  // The body for a preview: kept secrets stand in for (a certificate: left out).
  previewBody() {
    const body = clone(this.model);
    for (const path of this.keptSecrets()) {
      const field = path[path.length - 1];
      if (field === "pfx") setAt(body, path.slice(0, -1), undefined);
      else if (getAt(body, path.slice(0, -1)) !== undefined) setAt(body, path, STAND_IN[field]);
    }
    return { properties: body };
  }

  // Problems a preview does not mark: those of kept secrets (their stand-ins), and those of
  // fields not yet changed (a new form is not wrong before the user has typed).
  ignoredTarget() {
    const kept = this.keptSecrets().map((path) => path.join("."));
    const form = this.form;
    return (target) => kept.some((path) => target === path || path.startsWith(`${target}.`)) ||
      (form.placeOf(target) !== "" && !form.touched.has(form.placeOf(target)));
  }

  previewOf(body) {
    return arm("POST", this.collection, "/previewOccurrences", { query: { count: String(PREVIEW_COUNT) }, body });
  }

  async preview() {
    const asked = ++this.previewed;
    let answer = null;
    let actionProblems = [];
    try {
      answer = await this.previewOf(this.previewBody());
    } catch (failure) {
      if (asked !== this.previewed) return;
      if (failure instanceof KeyRefused) return handleFailure(failure);
      // Only the action is wrong (or not filled in yet): the schedule still previews, with an
      // action standing in, and the action's problems are marked beside its fields.
      if (failure instanceof ApiFailed && failure.details.length && failure.details.every(aboutTheAction)) {
        const body = this.previewBody();
        body.properties.action = clone(STAND_IN_ACTION);
        try {
          answer = await this.previewOf(body);
          actionProblems = failure.details;
        } catch {
          answer = null;
        }
        if (asked !== this.previewed) return;
      }
      if (!answer) {
        const placed = failure instanceof ApiFailed
          ? this.form.showProblems(failure.details, "properties.", this.problems, this.ignoredTarget()) : 0;
        this.words.textContent = "";
        this.previewNote.textContent = !(failure instanceof ApiFailed) ? `No preview: ${failure.message}`
          : placed ? "Fix what is marked to see when the job would run."
            : "Fill in the form to see when the job would run.";
        this.list.replaceChildren();
        this.excludedList.replaceChildren();
        this.markEndBeforeStart();
        return;
      }
    }
    if (asked !== this.previewed) return;
    this.form.showProblems(actionProblems, "properties.", this.problems, this.ignoredTarget());
    this.markEndBeforeStart();
    const written = getAt(this.model, ["recurrence", "timeZone"]);
    const zone = answer.timeZone ? { name: written || answer.timeZone, iana: answer.timeZone } : null;
    this.words.textContent = answer.schedule;
    this.previewNote.textContent = answer.value.length
      ? `The next ${answer.value.length === 1 ? "run" : `${answer.value.length} runs`}, if saved now` +
        (zone ? ` (UTC and ${zone.name}):` : " (UTC):")
      : "It would never run: its schedule has no occurrence left.";
    this.list.replaceChildren(...answer.value.map((iso) => h("li", {}, when(iso, zone))));
    this.excludedList.replaceChildren(...excludedItems(answer.excluded || [], zone)); // exclusions.js
  }

  // An end time at or before the start time saves a job that never runs: the API takes it, as
  // the original service did, but in the form it is a mistake to say at the field.
  endBeforeStart() {
    const start = instantOf(this.model.startTime);
    const end = instantOf(getAt(this.model, ["recurrence", "endTime"]));
    return !Number.isNaN(start) && !Number.isNaN(end) && end <= start
      ? "is not after the start time: the job would never run. Choose a later end, or clear it." : null;
  }

  markEndBeforeStart() {
    const problem = this.endBeforeStart();
    const field = this.form.fields.get("recurrence.endTime");
    if (!problem || !field) return false;
    field.error.textContent = problem;
    field.element.setAttribute("aria-invalid", "true");
    return true;
  }

  async save() {
    const name = this.jobName || (this.name || "").trim();
    const nameField = this.form.fields.get("#name");
    if (!name || this.endBeforeStart()) {
      // Every field's problem at once, not the first one found: the preview asks the API about
      // the whole form, as if the user had touched every field.
      for (const place of this.form.fields.keys()) this.form.touched.add(place);
      clearTimeout(this.timer);
      await this.preview();
      if (!name) {
        nameField.error.textContent = "A job needs a name: letters, digits, - and _.";
        nameField.element.setAttribute("aria-invalid", "true");
      }
      const invalid = document.querySelector(".editor [aria-invalid='true']");
      (invalid || nameField.element).focus();
      return;
    }
    const jobId = `${this.collection}/jobs/${encodeURIComponent(name)}`;
    this.saveButton.disabled = true;
    try {
      if (this.original) {
        const patch = mergePatch(this.original, this.model);
        this.dropReplacedSecrets(patch);
        if (Object.keys(patch).length) await arm("PATCH", jobId, "", { body: { properties: patch } });
      } else {
        await arm("PUT", jobId, "", { body: { properties: this.model } });
      }
    } catch (failure) {
      if (!(failure instanceof ApiFailed)) return handleFailure(failure);
      const placed = this.form.showProblems(failure.details, "properties.", this.problems);
      if (!placed && !this.problems.childElementCount) this.problems.replaceChildren(h("li", {}, failure.message));
      const invalid = document.querySelector(".editor [aria-invalid='true']");
      (invalid || this.problems).focus();
      return;
    } finally {
      this.saveButton.disabled = false;
    }
    navigate(`#/${jobPath(jobId)}`, this.original ? `Job ${name} was saved.` : `Job ${name} was created.`);
  }

  // A change of authentication type must not leave the old type's secrets stored: the patch
  // removes each one it does not set.
  dropReplacedSecrets(patch) {
    for (const action of ACTION_PLACES) {
      for (const place of SECRET_PLACES) {
        const path = [...action, ...place];
        const parentPatch = getAt(patch, path.slice(0, -1));
        if (isObject(parentPatch) && "type" in parentPatch && getAt(this.model, path) === undefined) {
          parentPatch[path[path.length - 1]] = null;
        }
      }
    }
  }
}

// --- the collection form -------------------------------------------------------------------

const SKUS = { Free: "Free", Standard: "Standard", P10Premium: "P10 Premium", P20Premium: "P20 Premium" };

export async function collectionForm(names) {
  let original = null;
  if (names) {
    const found = await arm("GET", collectionId(...names));
    original = /** @type {{location: string, properties: object, tags?: object}} */ ({ location: found.location, properties: clone(found.properties) });
    if (found.tags) original.tags = found.tags;
  }
  const model = original ? clone(original) : { location: "West Europe", properties: { sku: { name: "Standard" } } };
  const form = new Form(model, () => {});
  const problems = h("ul", { class: "form-problems error", role: "alert" });
  const where = {};
  const place = (label, key, help) => form.wrap(`f-${key}`, label, [`#${key}`], h("input", {
    id: `f-${key}`, required: true, autocomplete: "off", spellcheck: "false",
    "aria-describedby": `f-${key}-help f-${key}-error`,
    oninput: (event) => { where[key] = event.target.value.trim(); },
  }), help);
  const save = async (event) => {
    event.preventDefault();
    const [subscription, group, name] = names || [where.subscription, where.group, where.name];
    const missing = [["subscription", subscription], ["group", group], ["name", name]].filter(([, value]) => !value);
    form.clearProblems();
    for (const [key] of missing) form.fields.get(`#${key}`).error.textContent = "Required.";
    if (missing.length) return form.fields.get(`#${missing[0][0]}`).element.focus();
    const id = collectionId(subscription, group, name);
    try {
      if (original) await arm("PATCH", id, "", { body: mergePatch(original, form.model) });
      else await arm("PUT", id, "", { body: form.model });
    } catch (failure) {
      if (!(failure instanceof ApiFailed)) return handleFailure(failure);
      const placed = form.showProblems(failure.details, "", problems);
      if (!placed && !problems.childElementCount) problems.replaceChildren(h("li", {}, failure.message));
      return (document.querySelector(".editor [aria-invalid='true']") || problems).focus();
    }
    navigate(`#/${collectionPath(id)}`, `Collection ${name} was ${original ? "saved" : "created"}.`);
  };
  const back = names ? `#/collections/${encoded(...names)}` : "#/";
  const trail = [["Job collections", "#/"]];
  if (names) trail.push([names[2], back]);
  trail.push([names ? "Edit" : "New collection"]);
  return {
    trail,
    content: [
      h("h1", {}, names ? `Edit collection ${names[2]}` : "New collection"),
      h("form", { class: "editor single", novalidate: true, onsubmit: save },
        names ? null : h("fieldset", { class: "group" }, h("legend", {}, "Where"),
          place("Subscription", "subscription", "An id of your choosing, such as a GUID."),
          place("Resource group", "group", ""),
          place("Name", "name", "It cannot be changed later.")),
        h("fieldset", { class: "group" }, h("legend", {}, "Collection"),
          form.field("Location", ["location"], { help: "An Azure region, such as West Europe." }),
          form.field("Plan", ["properties", "sku", "name"], { control: "select", options: SKUS }),
          form.field("State", ["properties", "state"], { control: "select",
            options: { "": "Enabled (default)", Enabled: "Enabled", Disabled: "Disabled", Suspended: "Suspended" } })),
        h("fieldset", { class: "group" }, h("legend", {}, "Quota (empty: the plan's)"),
          form.field("Most jobs", ["properties", "quota", "maxJobCount"], { kind: "number" }),
          h("div", { class: "row-fields" },
            form.field("Most often: every", ["properties", "quota", "maxRecurrence", "interval"], { kind: "number" }),
            form.field("Unit", ["properties", "quota", "maxRecurrence", "frequency"], { control: "select",
              options: { "": "(plan's)", ...Object.fromEntries(FREQUENCIES.map((unit) => [unit, unit.toLowerCase()])) } }))),
        problems,
        h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, names ? "Save" : "Create collection"),
          h("a", { class: "button", href: back }, "Cancel"))),
    ],
  };
}
