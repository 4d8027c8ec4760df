// @ts-check
// Templates in and out (docs/templates.md): a collection or a resource group exported as a
// deployment template file, and a template file imported into a resource group, what-if first.
// Imports console.js's helpers (h, arm, call, notify...).
import { ApiFailed, actionButton, arm, badge, call, cell, collectionPath, encoded, h, handleFailure, jobPath, message, notify, on, table, update, when } from "./console.js";
import { isObject } from "./forms.js";


const IMPORT_OUTCOME_WORDS = {
  Created: "created", Updated: "changed", Unchanged: "unchanged", Deleted: "deleted",
  Skipped: "skipped", Failed: "failed", NotApplied: "not applied",
};

// --- export ------------------------------------------------------------------------------

function groupId(subscription, group) {
  return `/subscriptions/${encodeURIComponent(subscription)}/resourceGroups/${encodeURIComponent(group)}`;
}

// The template as a file the browser saves: a Blob behind a link with `download`, clicked once.
function downloadJson(fileName, value) {
  const blob = new Blob([`${JSON.stringify(value, null, 2)}\n`], { type: "application/json" });
  const address = URL.createObjectURL(blob);
  const link = h("a", { href: address, download: fileName, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(address), 60000); // the download has long started by then
}

// Secrets come as securestring parameters, never as values: the file can be kept anywhere.
async function exportTemplate(resourceId, suffix, fileName) {
  const { template } = await arm("POST", resourceId, suffix);
  downloadJson(fileName, template);
  const secrets = Object.values(template.parameters || {}).filter((p) => p.type === "securestring").length;
  return `${fileName} was saved` + (secrets
    ? `: its ${secrets} secret${secrets === 1 ? " is a parameter" : "s are parameters"}, give ` +
      `${secrets === 1 ? "it" : "them"} again when importing.` : ".");
}

export function templateButtons(collection) {
  const subscription = collection.subscription;
  // Export writes secrets as parameters and import changes things: a contributor's.
  return h("div", { class: "actions", "data-needs": "contributor" },
    actionButton("Export template", `export:${collection.id}`, () =>
      exportTemplate(collection.id, "/exportTemplate", `${collection.name}.json`),
    { "aria-label": `Export template of collection ${collection.name}` }),
    actionButton("Export resource group", `export:${collection.resourceGroup}`, () =>
      exportTemplate(groupId(subscription, collection.resourceGroup),
        "/providers/Microsoft.Scheduler/exportTemplate", `${collection.resourceGroup}.json`),
    { "aria-label": `Export resource group ${collection.resourceGroup} as a template` }),
    h("a", { class: "button", href: `#/import/${encoded(subscription, collection.resourceGroup)}`,
      "aria-label": `Import template into resource group ${collection.resourceGroup}` }, "Import template"));
}

// --- import ------------------------------------------------------------------------------

// The import page: files and choices, then what-if, then (confirmed) the same body applied.
export function importForm(where) {
  const [subscription, group] = where || ["", ""];
  const problems = h("p", { id: "import-problem", class: "error", role: "alert" });
  const outcome = h("section", { id: "import-outcome", class: "import-outcome", tabindex: "-1",
    "aria-labelledby": "import-outcome-title", hidden: true });
  let checked = null; // the body the what-if ran with: applying sends exactly it
  const forget = () => {
    checked = null;
    outcome.hidden = true;
    outcome.replaceChildren();
  };
  const text = (id, label, value, help) => h("div", { class: "field" },
    h("label", { for: id }, label),
    h("input", { id, value, required: id !== "import-location", autocomplete: "off", spellcheck: "false",
      "aria-describedby": help ? `${id}-help` : null, oninput: forget }),
    help ? h("p", { id: `${id}-help`, class: "help" }, help) : null);
  const file = (id, label, help, chosen = null) => h("div", { class: "field" },
    h("label", { for: id }, label),
    h("input", { id, type: "file", accept: ".json,application/json", required: id === "import-template",
      "aria-describedby": `${id}-help`, onchange: (event) => { forget(); if (chosen) chosen(event); } }),
    h("p", { id: `${id}-help`, class: "help" }, help));
  // The template's own parameters and the calls only Azure answers, as fields of their own,
  // drawn when its file is chosen.
  const parameterFields = h("div", { id: "import-parameter-fields" },
    h("p", { class: "help" }, "Choose a template file: its parameters appear here to fill in."));
  const callFields = h("div", { id: "import-call-fields" });
  const templateChosen = async (event) => {
    const chosen = event.currentTarget.files[0];
    let template = null;
    try {
      template = chosen ? JSON.parse(await chosen.text()) : null;
    } catch {
      template = null; // said when checked: "The template file is not JSON"
    }
    parameterFields.replaceChildren(...parameterInputs(template, forget));
    // A template that reads resourceGroup().location needs one: this service has no groups.
    const needsLocation = template !== null && /resourcegroup\(\)\.location/i.test(JSON.stringify(template));
    document.querySelector("label[for='import-location']").textContent =
      needsLocation ? "Location (the template reads resourceGroup().location)" : "Location (optional)";
    callFields.replaceChildren(...callInputs(template, forget));
  };
  const mode = (value, words, help) => h("label", { class: "check" },
    h("input", { type: "radio", name: "import-mode", value, checked: value === "Incremental",
      onchange: forget }), h("span", {}, h("strong", {}, words), ` ${help}`));

  const whatIf = async (event) => {
    event.preventDefault();
    forget();
    problems.textContent = "";
    const form = event.currentTarget;
    let body;
    try {
      body = await importBody(form);
    } catch (failure) {
      problems.textContent = failure.message;
      return form.querySelector("[aria-invalid='true']")?.focus();
    }
    const check = form.querySelector("button[type='submit']");
    check.disabled = true; // one check at a time
    const report = await sendImport(body, true, problems, outcome).finally(() => { check.disabled = false; });
    if (report && report.status === "Succeeded") {
      checked = body;
      const changes = report.resources.filter((r) => ["Created", "Updated", "Deleted"].includes(r.outcome));
      const deletes = report.resources.filter((r) => r.outcome === "Deleted").length;
      outcome.append(changes.length
        ? h("div", { class: "actions" }, h("button", { type: "button", class: deletes ? "danger" : "primary",
          onclick: apply }, deletes ? `Apply, deleting ${deletes} job${deletes === 1 ? "" : "s"}`
          : "Apply these changes"))
        : h("p", {}, "Nothing to apply: every resource is unchanged or skipped."));
    }
    if (!outcome.hidden) outcome.focus(); // the outcomes, then the button that applies them
  };

  const apply = async (event) => {
    event.currentTarget.disabled = true;
    const report = await sendImport(checked, false, problems, outcome);
    checked = null;
    if (report && report.status === "Succeeded") notify(`Imported: ${summaryWords(report.summary)}.`);
    if (!outcome.hidden) outcome.focus();
  };

  return {
    trail: [["Job collections", "#/"], ["Import template"]],
    content: [
      h("h1", {}, "Import a template"),
      h("p", { class: "explain" }, "A deployment template (JSON, as az bicep build or the portal's export " +
        "writes it): its job collections and jobs are created or updated in the resource group, in " +
        "dependency order; resources of other providers are skipped. You see what would happen first, " +
        "and apply it only when you confirm."),
      h("form", { id: "import", class: "editor single", novalidate: true, onsubmit: whatIf },
        h("fieldset", { class: "group" }, h("legend", {}, "Into"),
          text("import-subscription", "Subscription", subscription),
          text("import-group", "Resource group", group),
          text("import-location", "Location (optional)", "",
            "What resourceGroup().location gives; empty: the location of a collection already in the group.")),
        h("fieldset", { class: "group" }, h("legend", {}, "Files"),
          file("import-template", "Template file", "The deployment template, such as azuredeploy.json.",
            templateChosen),
          file("import-parameters", "Parameters file (optional)",
            "Values of the template's parameters, such as azuredeploy.parameters.json; " +
            "secrets an export wrote as parameters are given here. A value typed below wins over the file's.")),
        h("fieldset", { class: "group" }, h("legend", {}, "Parameters"), parameterFields),
        h("fieldset", { class: "group" }, h("legend", {}, "Jobs without a start time"),
          h("div", { class: "field" },
            h("label", { for: "import-start" }, "They start"),
            h("select", { id: "import-start", "aria-describedby": "import-start-help", onchange: (event) => {
              document.getElementById("import-start-at").hidden = event.target.value !== "at";
              forget();
            } },
            h("option", { value: "" }, "at once, when imported (the API's rule)"),
            h("option", { value: "NextWholeMinute" }, "at the next whole minute"),
            h("option", { value: "at" }, "at a time I choose (UTC)")),
            h("input", { id: "import-start-at", type: "datetime-local", step: "1", hidden: true,
              "aria-label": "Start time for jobs without one (UTC)", oninput: forget }),
            h("p", { id: "import-start-help", class: "help" },
              "A job whose template gives no startTime runs as soon as it is imported (even on a " +
              "day its schedule skips) and takes its seconds from that moment. The check below " +
              "shows each job's first run."))),
        h("fieldset", { class: "group" }, h("legend", {}, "Mode"),
          mode("Incremental", "Incremental:", "create or update what the template names, leave the rest."),
          mode("Complete", "Complete:", "also delete the jobs of its collections that it does not name.")),
        h("details", { class: "json-view" },
          h("summary", {}, "Values only Azure knows: reference(), listKeys()"),
          callFields,
          h("div", { class: "field" },
            h("label", { for: "import-values" }, "More expression values (JSON)"),
            h("textarea", { id: "import-values", class: "json", rows: "4", spellcheck: "false",
              placeholder: "{\"listKeys(variables('rule'), '2018-01-01-preview')\": {\"primaryKey\": \"...\"}}",
              "aria-describedby": "import-values-help", oninput: forget }),
            h("p", { id: "import-values-help", class: "help" },
              "Each call's text, as the template writes it, and its value (the template's errors name them)."))),
        problems,
        h("div", { class: "actions" },
          h("button", { type: "submit", class: "primary" }, "Check (what-if)"),
          h("a", { class: "button", href: "#/" }, "Cancel"))),
      outcome,
    ],
  };
}

// The request's body from the form; a field that is missing or not JSON is marked.
async function importBody(form) {
  for (const marked of form.querySelectorAll("[aria-invalid]")) marked.removeAttribute("aria-invalid");
  const value = (/** @type {string} */ id) => /** @type {HTMLInputElement} */ (document.getElementById(id)).value.trim();
  for (const [id, words] of [["import-subscription", "The subscription"], ["import-group", "The resource group"]]) {
    if (!value(id)) throw invalidField(id, `${words} is required.`);
  }
  const body = { where: [value("import-subscription"), value("import-group")] };
  body.template = await jsonFile("import-template", "The template file");
  const parameters = await jsonFile("import-parameters", "The parameters file");
  const typed = typedParameters(form);
  if (parameters !== undefined || Object.keys(typed).length) {
    // A parameters file holds its values under "parameters", or is the values themselves.
    const fromFile = parameters && isObject(parameters.parameters) ? parameters.parameters : parameters;
    body.parameters = { ...(isObject(fromFile) ? fromFile : {}), ...typed };
  }
  const modeChosen = /** @type {HTMLInputElement | null} */ (document.querySelector("input[name='import-mode']:checked"));
  body.mode = modeChosen ? modeChosen.value : "Incremental";
  if (value("import-location")) body.location = value("import-location");
  const start = value("import-start");
  if (start === "at") {
    if (!value("import-start-at")) throw invalidField("import-start-at", "Choose the start time for jobs without one.");
    body.defaultStartTime = `${value("import-start-at")}Z`;
  } else if (start) body.defaultStartTime = start;
  const values = typedCallValues(form);
  if (value("import-values")) {
    Object.assign(values, parsedJson("import-values", value("import-values"), "The expression values"));
  }
  if (Object.keys(values).length) body.expressionValues = values;
  return body;
}

// --- the template's parameters and Azure-only calls, as fields ------------------------------

const SECURE_TYPES = ["securestring", "secureobject"];

function parameterInputs(template, changed) {
  const declared = template && isObject(template.parameters) ? Object.entries(template.parameters) : [];
  if (!declared.length) return [h("p", { class: "help" }, template ? "The template has no parameters." :
    "Choose a template file: its parameters appear here to fill in.")];
  return declared.map(([name, declaration], index) => {
    const id = `import-parameter-${index}`;
    const type = String((declaration && declaration.type) || "string").toLowerCase();
    const secure = SECURE_TYPES.includes(type);
    const hasDefault = isObject(declaration) && "defaultValue" in declaration;
    const description = declaration && declaration.metadata && declaration.metadata.description;
    const shownDefault = hasDefault && !secure ? `default: ${JSON.stringify(declaration.defaultValue)}` : null;
    const help = [description, shownDefault, hasDefault ? null : "Required: it has no default."]
      .filter(Boolean).join(" ");
    const common = { id, "data-parameter": name, "data-type": type, "aria-describedby": `${id}-help`,
      oninput: changed, onchange: changed };
    let control;
    if (Array.isArray(declaration.allowedValues)) {
      control = h("select", common, h("option", { value: "" }, hasDefault ? "(the default)" : "(choose)"),
        declaration.allowedValues.map((allowed) => h("option", { value: JSON.stringify(allowed) },
          typeof allowed === "string" ? allowed : JSON.stringify(allowed))));
      control.dataset.allowed = "true";
    } else if (type === "bool") {
      control = h("select", common, h("option", { value: "" }, hasDefault ? "(the default)" : "(choose)"),
        h("option", { value: "true" }, "true"), h("option", { value: "false" }, "false"));
    } else if (type === "array" || type === "object" || type === "secureobject") {
      control = h("textarea", { ...common, class: "json", rows: "3", spellcheck: "false",
        placeholder: type === "array" ? "[...] (JSON)" : "{...} (JSON)" });
    } else {
      control = h("input", { ...common, type: secure ? "password" : "text", autocomplete: secure ? "new-password" : "off",
        spellcheck: "false", inputmode: type === "int" ? "numeric" : null });
    }
    return h("div", { class: "field" },
      h("label", { for: id }, `${name} (${type})`), control,
      h("p", { id: `${id}-help`, class: "help" }, help));
  });
}

// The parameters typed in their fields, as ARM takes them ({"name": {"value": ...}}); empty
// fields are left to the file or the default. A value of the wrong type marks its field.
function typedParameters(form) {
  const typed = {};
  for (const control of form.querySelectorAll("[data-parameter]")) {
    const text = control.value.trim();
    if (!text) continue;
    const type = control.dataset.type;
    const words = `The parameter ${control.dataset.parameter}`;
    let value = text;
    if (control.dataset.allowed || type === "bool") value = JSON.parse(text);
    else if (type === "int") {
      if (!/^-?\d+$/.test(text)) throw invalidField(control.id, `${words} is an int: a whole number.`);
      value = Number(text);
    } else if (["array", "object", "secureobject"].includes(type)) value = parsedJson(control.id, text, words);
    typed[control.dataset.parameter] = { value };
  }
  return typed;
}

// The calls only Azure answers (reference(), listKeys() and the other list*() calls), each as
// the template writes it, found in its expressions: one JSON field each.
function callInputs(template, changed) {
  const calls = template ? azureOnlyCalls(template) : [];
  if (!calls.length) return [];
  return [h("p", { class: "help" }, "The template reads these from Azure: give each one's value as JSON " +
    "(a listKeys() of a Service Bus rule: {\"primaryKey\": \"...\", \"keyName\": \"...\"})."),
  ...calls.map((call, index) => {
    const id = `import-call-${index}`;
    return h("div", { class: "field" }, h("label", { for: id }, call),
      h("textarea", { id, class: "json", rows: "2", spellcheck: "false", "data-call": call, oninput: changed }));
  })];
}

function typedCallValues(form) {
  const values = {};
  for (const control of form.querySelectorAll("[data-call]")) {
    const text = control.value.trim();
    if (text) values[control.dataset.call] = parsedJson(control.id, text, `The value of ${control.dataset.call}`);
  }
  return values;
}

const AZURE_ONLY_CALL = /\b(reference|list[a-z]*)\s*\(/gi;

function azureOnlyCalls(template) {
  const found = new Set();
  const visit = (value) => {
    if (typeof value === "string") {
      if (value.startsWith("[") && !value.startsWith("[[")) for (const call of callsIn(value)) found.add(call);
    } else if (Array.isArray(value)) value.forEach(visit);
    else if (isObject(value)) Object.values(value).forEach(visit);
  };
  visit(template.resources);
  visit(template.variables);
  visit(template.outputs);
  return [...found];
}

// Each reference(...) or list...(...) call in an expression, its parentheses balanced and
// quoted text skipped ('it''s' included).
function callsIn(expression) {
  const calls = [];
  for (const match of expression.matchAll(AZURE_ONLY_CALL)) {
    let depth = 0;
    let quoted = false;
    for (let at = match.index + match[0].length - 1; at < expression.length; at += 1) {
      const char = expression[at];
      if (char === "'") quoted = !quoted;
      else if (!quoted && char === "(") depth += 1;
      else if (!quoted && char === ")" && --depth === 0) {
        calls.push(expression.slice(match.index, at + 1));
        break;
      }
    }
  }
  return calls;
}

async function jsonFile(id, words) {
  const input = /** @type {HTMLInputElement} */ (document.getElementById(id));
  const chosen = input.files[0];
  if (!chosen) {
    if (input.required) throw invalidField(id, `${words} is required: choose one.`);
    return undefined;
  }
  return parsedJson(id, await chosen.text(), `${words} (${chosen.name})`);
}

function parsedJson(id, text, words) {
  try {
    return JSON.parse(text);
  } catch (failure) {
    throw invalidField(id, `${words} is not JSON: ${failure.message}`);
  }
}

function invalidField(id, message) {
  document.getElementById(id).setAttribute("aria-invalid", "true");
  return new Error(message);
}

// Sends the import; shows its report (also that of a refused or stopped one) and its error.
async function sendImport(body, whatIf, problems, outcome) {
  const { where, ...sent } = body;
  problems.textContent = "";
  let report;
  try {
    report = await arm("POST", groupId(...where), "/providers/Microsoft.Scheduler/importTemplate",
      { body: { ...sent, whatIf } });
  } catch (failure) {
    if (!(failure instanceof ApiFailed)) {
      handleFailure(failure);
      return null;
    }
    problems.textContent = failure.message; // names the resource, the property and the expression
    report = failure.body && failure.body.resources ? failure.body : null;
  }
  outcome.replaceChildren(...(report ? reportView(report) : []));
  outcome.hidden = !report;
  return report;
}

function summaryWords(summary) {
  return Object.entries(summary).map(([outcome, count]) => `${count} ${IMPORT_OUTCOME_WORDS[outcome] || outcome}`).join(", ");
}

function reportView(report) {
  const title = report.whatIf
    ? (report.status === "Succeeded" ? "What the import would do" : "What-if: the import would stop")
    : (report.status === "Succeeded" ? "What the import did" : "The import stopped");
  const rows = report.resources.map((resource) => {
    const shownAt = resource.id && resource.outcome !== "Deleted"
      ? (resource.type.endsWith("/jobs") ? jobPath(resource.id) : collectionPath(resource.id)) : null;
    const why = [resource.reason, ...(resource.warnings || [])].filter(Boolean);
    return h("tr", {},
      cell("Outcome", badge(resource.outcome)),
      cell("Type", resource.type),
      cell("Name", shownAt && !report.whatIf ? h("a", { href: `#/${shownAt}` }, resource.name) : resource.name),
      cell("First run", resource.firstRun ? when(resource.firstRun) : ""),
      cell("Why", why.length ? h("ul", { class: "plain" }, why.map((line) => h("li", {}, line))) : ""));
  });
  return [
    h("h2", { id: "import-outcome-title" }, title),
    h("p", {}, `${report.mode} mode: ${summaryWords(report.summary) || "no resources"}.`),
    table(["Outcome", "Type", "Name", "First run", "Why"], rows, "The template has no resources.", "One outcome per resource"),
  ];
}
