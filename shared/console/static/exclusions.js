// @ts-check
// The job form's days off (recurrence.exclusions and onExcluded): public holiday calendars,
// blackout dates and ranges, weekdays that are not business days, and what becomes of a run
// that falls on one of them; and the preview's list of the runs they skip or move. Imports
// forms.js's path helpers and console.js's.
import { consoleApi, h, on, when } from "./console.js";
import { WEEK_DAYS, getAt, setAt } from "./forms.js";


const ON_EXCLUDED = {
  "": "Skip the run (default)", Skip: "Skip the run",
  NextBusinessDay: "Move it to the next business day", PreviousBusinessDay: "Move it to the previous business day",
};
let holidayCountries = null; // the holidays package's list, asked for once per page

function knownHolidayCountries() {
  if (!holidayCountries) {
    holidayCountries = consoleApi("holidays").then((answer) => answer.value).catch(() => {
      holidayCountries = null; // asked again next time the form is drawn
      return [];
    });
  }
  return holidayCountries;
}

const calendarCode = (calendar) => (calendar.subdivision ? `${calendar.country}-${calendar.subdivision}` : String(calendar.country));
const datesText = (span) => (typeof span === "string" ? span : `${span.from} to ${span.to}`);

// The fields of the days off, drawn from the model each time the form is (a list's change
// redraws the form). Nothing here writes the model until the user changes it, so an existing
// job's exclusions are saved back exactly as they were read.
export function exclusionFields(editor) {
  const form = editor.form;
  const model = editor.model;
  const at = (...path) => ["recurrence", "exclusions", ...path];
  const listChanged = (path, items) => {
    form.touched.add(path.join("."));
    setAt(model, path, items.length ? items : undefined);
    form.changed(true);
  };
  const calendars = getAt(model, at("holidays")) || [];
  const dates = getAt(model, at("dates")) || [];
  return h("fieldset", { class: "group days-off" }, h("legend", {}, "Days off"),
    holidayFields(form, at("holidays"), calendars, listChanged),
    dateFields(form, at("dates"), dates, listChanged),
    form.checkboxes("Weekdays that are not business days", at("weekdays"), WEEK_DAYS),
    h("p", { class: "help" }, "None ticked: Saturday and Sunday when runs move to a business day, none when they are skipped."),
    form.field("A run that falls on a day off", ["recurrence", "onExcluded"], { control: "select", options: ON_EXCLUDED }));
}

function holidayFields(form, path, calendars, listChanged) {
  const country = h("select", { id: "f-holiday-country", "aria-describedby": "f-holiday-help" },
    h("option", { value: "" }, "Loading the countries…"));
  const subdivision = h("select", { id: "f-holiday-subdivision" }, h("option", { value: "" }, "The whole country"));
  const error = h("p", { id: "f-exclusions-holidays-error", class: "field-error" });
  const list = h("ul", { class: "chosen-days" }, calendars.map((calendar, index) => h("li", {},
    h("span", { class: "calendar-name", "data-code": calendarCode(calendar) }, calendarCode(calendar)), " ",
    h("button", { type: "button", class: "small", "aria-label": `Remove the holidays of ${calendarCode(calendar)}`,
      onclick: () => listChanged(path, calendars.filter((_, other) => other !== index)) }, "Remove"))));
  knownHolidayCountries().then((countries) => {
    const byCode = new Map(countries.map((known) => [known.code, known]));
    country.replaceChildren(h("option", { value: "" }, countries.length ? "Choose a country" : "The list could not be read"),
      ...countries.map((known) => h("option", { value: known.code }, `${known.name} (${known.code})`)));
    for (const name of list.querySelectorAll(".calendar-name")) {
      const [code, sub] = name.dataset.code.split("-");
      const known = byCode.get(code.toUpperCase());
      const place = known && sub ? (known.subdivisions.find((each) => each.code.toUpperCase() === sub.toUpperCase()) || {}).name : null;
      if (known) name.textContent = `${place ? `${place}, ` : ""}${known.name} (${name.dataset.code})`;
    }
    country.onchange = () => {
      const known = byCode.get(country.value);
      subdivision.replaceChildren(h("option", { value: "" }, "The whole country"),
        ...(known ? known.subdivisions : []).map((sub) => h("option", { value: sub.code }, `${sub.name} (${sub.code})`)));
    };
  });
  const add = h("button", { type: "button", onclick: () => {
    if (!country.value) return;
    const chosen = subdivision.value ? { country: country.value, subdivision: subdivision.value } : { country: country.value };
    listChanged(path, [...calendars, chosen]);
  } }, "Add holiday calendar");
  const group = h("fieldset", { class: "field", id: "f-exclusions-holidays", "aria-describedby": "f-exclusions-holidays-error" },
    h("legend", {}, "Public holidays"), list,
    h("div", { class: "row-fields" },
      h("div", { class: "field" }, h("label", { for: "f-holiday-country" }, "Country"), country),
      h("div", { class: "field" }, h("label", { for: "f-holiday-subdivision" }, "Region (optional)"), subdivision)),
    h("p", { id: "f-holiday-help", class: "help" }, "Read on the job's own clock, in every year."),
    add, error);
  form.fields.set(path.join("."), { element: group, error });
  return group;
}

function dateFields(form, path, dates, listChanged) {
  const from = h("input", { id: "f-exclusion-from", type: "date" });
  const to = h("input", { id: "f-exclusion-to", type: "date", "aria-describedby": "f-exclusion-to-help" });
  const error = h("p", { id: "f-exclusions-dates-error", class: "field-error" });
  const list = h("ul", { class: "chosen-days" }, dates.map((span, index) => h("li", {}, datesText(span), " ",
    h("button", { type: "button", class: "small", "aria-label": `Remove ${datesText(span)}`,
      onclick: () => listChanged(path, dates.filter((_, other) => other !== index)) }, "Remove"))));
  const add = h("button", { type: "button", onclick: () => {
    if (!from.value) return;
    listChanged(path, [...dates, !to.value || to.value === from.value ? from.value : { from: from.value, to: to.value }]);
  } }, "Add dates");
  const group = h("fieldset", { class: "field", id: "f-exclusions-dates", "aria-describedby": "f-exclusions-dates-error" },
    h("legend", {}, "Blackout dates"), list,
    h("div", { class: "row-fields" },
      h("div", { class: "field" }, h("label", { for: "f-exclusion-from" }, "From"), from),
      h("div", { class: "field" }, h("label", { for: "f-exclusion-to" }, "To (optional)"), to)),
    h("p", { id: "f-exclusion-to-help", class: "help" }, "Both days included; empty: the one day."),
    add, error);
  form.fields.set(path.join("."), { element: group, error });
  return group;
}

// The preview's runs that the days off skip or move, each with its reason in words (a symbol
// beside them, never colour alone).
export function excludedItems(excluded, zone) {
  return excluded.map((item) => h("li", { class: item.movedTo ? "moved" : "skipped" },
    h("span", { class: "mark", "aria-hidden": "true" }, item.movedTo ? "↷" : "⊘"), " ",
    h("strong", {}, item.movedTo ? "Moved: " : "Skipped: "), when(item.scheduled, zone),
    ` ${item.reason}`, item.movedTo ? [" — runs at ", when(item.movedTo, zone)] : null));
}
