// @ts-check
// What needs an operator's look (docs/console.md): the messages on the poison queue and the
// claims past their deadline, as /console/api/attention lists them, and their counts on the
// overview. Imports console.js's helpers (h, cell, table, when...).
import { call, cell, consoleApi, h, message, on, table, when } from "./console.js";


function plural(count, one, many) {
  return `${count} ${count === 1 ? one : many}`;
}

// The overview's box: the two counts, and the way to the list, when either is not zero.
export function attentionSummary(counts) {
  if (!counts) return null;
  const poison = counts.poisonMessages;
  const claims = counts.claimsPastDeadline;
  if (!poison && !claims) {
    return h("p", { class: "explain" }, "No poison messages, no claims past their deadline.");
  }
  const most = claims >= counts.claimsCountedUpTo ? "+" : "";
  return h("section", { class: "attention", "aria-labelledby": "attention-title" },
    h("h2", { id: "attention-title" }, "Needs a look"),
    h("ul", { class: "trouble-list" },
      poison ? h("li", { class: "trouble poison" },
        plural(poison, "poison message", "poison messages")) : null,
      claims ? h("li", { class: "trouble claim" },
        claims === 1 && !most ? "1 claim past its deadline"
          : `${claims}${most} claims past their deadline`) : null),
    h("p", {}, h("a", { href: "#/attention", "data-focus": "attention" },
      "See the poison messages and claims")));
}

function jobLink(link) {
  const path = [link.subscription, link.resourceGroup, link.collection, "jobs", link.job]
    .map(encodeURIComponent).join("/");
  return h("a", { href: `#/collections/${path}` }, `${link.collection} / ${link.job}`);
}

function tryWords(attempt) {
  const which = attempt.retry === 0 ? "first try" : `retry ${attempt.retry}`;
  return `${attempt.action}, ${which}${attempt.runNow ? " (run now)" : ""}`;
}

function overdueWords(seconds) {
  if (seconds < 90) return `${seconds} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  if (seconds < 129600) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86400)} d`;
}

function carried(message) {
  if (message.kind === "unreadable") {
    return h("span", { class: "trouble poison" },
      "Unreadable: not a message the app sends (its text is not shown)");
  }
  if (message.kind === "dueRange") {
    const range = message.dueRange;
    return h("span", {}, `A range of the due index handed on by the timer (partition ${range.partition}, ` +
      `rows from ${range.low} to ${range.high})`);
  }
  return h("ul", { class: "plain" },
    message.deliveries.map((delivery) => h("li", {}, jobLink(delivery.job), " · occurrence ",
      when(delivery.attempt.expected), ` · ${tryWords(delivery.attempt)}`)),
    message.moreDeliveries ? h("li", {}, `and ${message.moreDeliveries} more`) : null);
}

export async function attentionView() {
  const { poison, claimsPastDeadline: claims } = await consoleApi("attention");
  const messageRows = poison.messages.map((message, index) => h("tr", { "data-key": `m${index}` },
    cell("Jobs and tries", carried(message)),
    cell("Moved there", when(message.inserted)),
    h("td", { class: "number", "data-label": "Dequeue count" }, String(message.dequeueCount))));
  const claimRows = claims.claims.map((claim) => h("tr", {
    "data-key": `${claim.job.subscription}/${claim.job.resourceGroup}/${claim.job.collection}/${claim.job.job}/${claim.attempt.expected}`,
  },
  cell("Job", jobLink(claim.job)),
  cell("Occurrence", when(claim.attempt.expected)),
  cell("Try", tryWords(claim.attempt)),
  cell("Claim's deadline", when(claim.deadline)),
  h("td", { class: "number", "data-label": "Overdue by" }, overdueWords(claim.secondsOverdue))));
  const overdueAfter = Math.round(claims.overdueAfterSeconds / 60);
  return {
    trail: [["Job collections", "#/"], ["Needs a look"]],
    content: [
      h("h1", {}, "Needs a look"),
      h("h2", {}, `Poison messages (${poison.depth})`),
      h("p", { class: "explain" },
        `Messages on ${poison.queue} failed their last delivery: the host gave them up, and ` +
        "their attempts were recorded as Failed so that their jobs moved on. Read the host's " +
        "logs for why (an outcome line per try names the job), fix the cause, then clear the " +
        "queue: nothing takes these messages again. They are shown, not removed."),
      table(["Jobs and tries", "Moved there", "Dequeue count"], messageRows,
        "None: no message waits on the poison queue.", "Poison messages"),
      poison.more ? h("p", { class: "explain" },
        `Only the first ${poison.messages.length} are shown; about ${poison.depth} wait there.`) : null,
      h("h2", {}, `Claims past their deadline (${claims.claims.length}${claims.more ? "+" : ""})`),
      h("p", { class: "explain" },
        "A try is claimed before its target is called. These claims ran out more than " +
        `${overdueAfter} min ago and no delivery took the try over: the delivery calling it died ` +
        "and its message is gone, so the job still waits for a try that nothing will run. " +
        "Look at the target for the call that may have arrived (its x-ms-scheduler-execution-id " +
        "names the occurrence), then save the job's definition again (a PUT; the console's Edit " +
        "saves only a change): a saved definition starts its schedule afresh, without that try."),
      table(["Job", "Occurrence", "Try", "Claim's deadline", "Overdue by"], claimRows,
        "None: every claim is live or was taken over.", "Claims past their deadline"),
      claims.more ? h("p", { class: "explain" },
        `Only the first ${claims.claims.length} are shown.`) : null,
    ],
  };
}
