// @ts-check
// The console's activity pages: who changed what, and who was refused, from the activity log
// (GET .../providers/Microsoft.Scheduler/activityLog). Uses console.js's helpers.
import { arm, badge, cell, exactTime, h, route, table } from "./console.js";


const ACTIVITY_SHOWN = 50;

function activityLogPath(subscription) {
  return `/subscriptions/${encodeURIComponent(subscription)}/providers/Microsoft.Scheduler/activityLog`;
}

// A resource's events (and those of what lies below it), newest first.
export async function activityOf(subscription, resourceId) {
  const quoted = resourceId.replace(/'/g, "''");
  const { value } = await arm("GET", activityLogPath(subscription), "", {
    query: { $top: String(ACTIVITY_SHOWN), $filter: `resourceId eq '${quoted}'` },
  });
  return value;
}

// "Microsoft.Scheduler/jobCollections/jobs/run/action" -> "jobs/run/action"
function operationWords(name) {
  return name.replace(/^Microsoft\.Scheduler\//, "").replace(/^jobCollections\//, "");
}

// "/subscriptions/s/resourceGroups/g/providers/Microsoft.Scheduler/jobCollections/c/jobs/j" -> "c/j"
function resourceWords(resourceId) {
  const parts = resourceId.split("/");
  const collection = parts.indexOf("jobCollections");
  if (collection >= 0) return parts.slice(collection + 1).filter((_, index) => index !== 1).join("/");
  return parts.slice(3).join("/") || resourceId;
}

export function activityTable(events, emptyText, caption) {
  const rows = events.map((event) => h("tr", { "data-key": event.eventDataId },
    cell("When", exactTime(event.eventTimestamp)),
    cell("Who", event.caller),
    cell("What", operationWords(event.operationName.value)),
    cell("On", resourceWords(event.resourceId)),
    cell("Result", badge(event.status.value), ` ${event.subStatus.value}`),
    cell("From", event.httpRequest.clientIpAddress || "")));
  return table(["When", "Who", "What", "On", "Result", "From"], rows, emptyText, caption);
}

export async function activityView(subscription) {
  const { value } = await arm("GET", activityLogPath(subscription), "", {
    query: { $top: String(ACTIVITY_SHOWN) },
  });
  return {
    trail: [["Job collections", "#/"], [`Activity of ${subscription}`]],
    content: [
      h("h1", {}, `Activity log of subscription ${subscription}`),
      h("p", { class: "explain" }, "Every change and every refused attempt of the last 7 days, " +
        "newest first (the API's activityLog route reads further back, up to 90 days)."),
      activityTable(value, "No changes recorded in the last 7 days.", "Activity, newest first"),
    ],
  };
}
