// @ts-check
// The console's role assignments page: a contributor lists, gives and takes away the roles of a
// subscription (GET, PUT and DELETE .../providers/Microsoft.Scheduler/roleAssignments), through
// the management API like every other change. Uses console.js's helpers.
import { API_VERSION, ApiFailed, call, cell, console_, h, handleFailure, notify, refresh, table } from "./console.js";


const ROLE_NAMES = ["Scheduler.Reader", "Scheduler.Operator", "Scheduler.Contributor"];
// Which answer field a form field gives (ARM's error details name it as their target).
const ASSIGNMENT_FIELDS = {
  "properties.principalId": "assignment-principal",
  "properties.roleName": "assignment-role",
  "properties.scope": "assignment-scope",
};

function roleAssignmentsPath(subscription) {
  return `/subscriptions/${encodeURIComponent(subscription)}/providers/Microsoft.Scheduler/roleAssignments`;
}

// Whether the signed-in caller may manage the subscription's assignments: a contributor over the
// whole service, or by an assignment at the subscription itself (the API decides in the end).
function managesRoles(subscription) {
  const me = console_.me;
  if (!me) return false;
  if (me.role === "contributor") return true;
  const scope = `/subscriptions/${subscription}`.toLowerCase();
  return me.grants.some((grant) => grant.role === "Scheduler.Contributor" &&
    grant.scope.toLowerCase().replace(/\/$/, "") === scope);
}

// ARM names role assignments by GUID; any random one will do.
function newAssignmentName() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

// Drawn again after a change: the page is a form, which a periodic refresh leaves alone.
async function redrawRoles(result) {
  console_.shownHash = null;
  await refresh();
  notify(result);
}

function showAssignmentError(failure) {
  for (const id of Object.values(ASSIGNMENT_FIELDS)) {
    document.getElementById(id).removeAttribute("aria-invalid");
  }
  if (!(failure instanceof ApiFailed)) return handleFailure(failure);
  const details = failure.details.map((detail) => {
    const field = document.getElementById(ASSIGNMENT_FIELDS[detail.target] || "");
    if (field) field.setAttribute("aria-invalid", "true");
    return detail.target ? `${detail.target}: ${detail.message}` : detail.message;
  });
  document.getElementById("assignment-error").textContent =
    [failure.message, ...details.filter((text) => text !== failure.message)].join(" ");
}

function assignmentRow(subscription, assignment) {
  const { principalId, roleName, scope } = assignment.properties;
  const what = `${roleName} of ${principalId} at ${scope}`;
  return h("tr", { "data-key": assignment.name },
    cell("Principal", h("span", { class: "mono" }, principalId)),
    cell("Role", roleName),
    cell("Scope", h("span", { class: "mono" }, scope)),
    cell("Actions", h("button", {
      type: "button", class: "danger", "aria-label": `Remove ${what}`,
      onclick: async (event) => {
        const button = event.currentTarget;
        button.disabled = true;
        try {
          await call("DELETE", `${roleAssignmentsPath(subscription)}/${encodeURIComponent(assignment.name)}`,
            { query: { "api-version": API_VERSION } });
          await redrawRoles(`Removed: ${what}.`);
        } catch (failure) {
          button.disabled = false;
          handleFailure(failure);
        }
      },
    }, "Remove")));
}

function assignmentForm(subscription) {
  const hint = (id, text) => h("p", { id: `${id}-help`, class: "help" }, text);
  const field = (id, label, control, help) => h("div", { class: "field" },
    h("label", { for: id }, label), control, hint(id, help));
  const submit = async (event) => {
    event.preventDefault();
    const principalId = /** @type {HTMLInputElement} */ (document.getElementById("assignment-principal")).value.trim();
    const roleName = /** @type {HTMLSelectElement} */ (document.getElementById("assignment-role")).value;
    const scope = /** @type {HTMLInputElement} */ (document.getElementById("assignment-scope")).value.trim() || `/subscriptions/${subscription}`;
    const button = /** @type {HTMLButtonElement} */ (document.getElementById("assignment-add"));
    button.disabled = true;
    document.getElementById("assignment-error").textContent = "";
    try {
      await call("PUT", `${roleAssignmentsPath(subscription)}/${newAssignmentName()}`, {
        query: { "api-version": API_VERSION },
        body: { properties: { principalId, roleName, scope } },
      });
      await redrawRoles(`${roleName} given to ${principalId} at ${scope}.`);
    } catch (failure) {
      button.disabled = false;
      showAssignmentError(failure);
    }
  };
  return h("form", { id: "role-assignment", "aria-labelledby": "assignment-title", onsubmit: submit },
    h("h2", { id: "assignment-title" }, "Give a role"),
    h("div", { class: "row-fields" },
      field("assignment-principal", "Principal object id",
        h("input", { id: "assignment-principal", required: true, autocomplete: "off", spellcheck: "false",
          "aria-describedby": "assignment-principal-help" }),
        "The object id of a user, group member or app, as Entra ID shows it (its GUID)."),
      field("assignment-role", "Role",
        h("select", { id: "assignment-role", "aria-describedby": "assignment-role-help" },
          ROLE_NAMES.map((name) => h("option", { value: name }, name))),
        "Reader reads; Operator also runs, enables and disables; Contributor does everything."),
      field("assignment-scope", "Scope (optional)",
        h("input", { id: "assignment-scope", autocomplete: "off", spellcheck: "false",
          placeholder: `/subscriptions/${subscription}/resourceGroups/<name>`,
          "aria-describedby": "assignment-scope-help" }),
        `Empty: all of subscription ${subscription}. A resource group's path limits the role to it.`)),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "assignment-add" }, "Add assignment")),
    h("p", { id: "assignment-error", class: "error", role: "alert" }));
}

export async function rolesView(subscription) {
  const trail = [["Job collections", "#/"], [`Role assignments of ${subscription}`]];
  if (!managesRoles(subscription)) {
    // The link is hidden from them; an address typed in shows this rather than the page.
    return {
      trail,
      content: [h("h1", {}, "Role assignments"),
        h("p", {}, `Only a Scheduler.Contributor of subscription ${subscription} manages its role ` +
          "assignments. Ask the service's administrator or a contributor.")],
    };
  }
  const { value } = await call("GET", roleAssignmentsPath(subscription), { query: { "api-version": API_VERSION } });
  return {
    trail,
    content: [
      h("h1", {}, `Role assignments of subscription ${subscription}`),
      h("p", { class: "explain" }, "Each gives a principal a role in this subscription, or in one of " +
        "its resource groups only. App roles given in the app registration hold over the whole " +
        "service and are not listed here."),
      table(["Principal", "Role", "Scope", "Actions"],
        value.map((assignment) => assignmentRow(subscription, assignment)),
        "No role assignments in this subscription.", "Role assignments"),
      assignmentForm(subscription),
    ],
  };
}
