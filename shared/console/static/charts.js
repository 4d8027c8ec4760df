// @ts-check
// Charts of a job's or a collection's runs over the last 24 hours or 7 days, drawn as SVG from
// the jobs' history (the same management API reads as the history table; no store of their
// own). Each chart tells its data by shape and pattern as well as by colour, and a table below
// holds the same numbers for screen readers and for copying.
import { arm, call, exactTime, h, refresh, table } from "./console.js";


const CHART_PERIODS = {
  day: { label: "Last 24 hours", span: 24 * 3600000, bin: 3600000, binName: "hour" },
  week: { label: "Last 7 days", span: 7 * 24 * 3600000, bin: 6 * 3600000, binName: "6 hours" },
};
const CHART_READ_PAGES = 10; // of 100 entries: a job's newest 1,000 entries at most
const CHART_READ_JOBS = 50; // a collection's chart reads the history of its first 50 jobs
const CHART_READ_AT_ONCE = 4;
const CHART_KEPT_MS = 60000; // history read for the charts is read again after a minute
const CHART_WIDTH = 720;
const CHART_HEIGHT = 200;
const CHART_MARGIN = { left: 56, right: 12, top: 12, bottom: 28 };
const OUTCOME_KINDS = [
  { name: "Completed", colour: "#2e7d32", pattern: null },
  { name: "Failed", colour: "#c62828", pattern: "hatch" },
  { name: "Postponed or skipped", colour: "#6d4c9f", pattern: "dots" },
];
const SVG_NS = "http://www.w3.org/2000/svg";

const charts_ = { period: "day", read: new Map() }; // read: job id -> {at, entries, complete}

function svg(tag, attributes = {}, ...children) {
  const element = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== null && value !== undefined) element.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

// --- reading the history ------------------------------------------------------------------

async function chartHistory(jobId, since) {
  const kept = charts_.read.get(jobId);
  if (kept && Date.now() - kept.at < CHART_KEPT_MS && kept.since <= since) return kept;
  const entries = [];
  let page = await arm("GET", jobId, "/history", { query: { $top: "100" } });
  let pages = 1;
  for (;;) {
    entries.push(...page.value.map((entry) => entry.properties));
    const oldest = page.value.length ? Date.parse(page.value[page.value.length - 1].properties.startTime) : 0;
    if (!page.nextLink || oldest < since || pages >= CHART_READ_PAGES) break;
    const next = new URL(page.nextLink);
    page = await call("GET", next.pathname + next.search);
    pages += 1;
  }
  const complete = !page.nextLink || entries.some((entry) => Date.parse(entry.startTime) < since);
  const read = { at: Date.now(), since, entries, complete };
  charts_.read.set(jobId, read);
  return read;
}

async function chartEntries(jobIds, since) {
  const shown = jobIds.slice(0, CHART_READ_JOBS);
  const reads = [];
  for (let index = 0; index < shown.length; index += CHART_READ_AT_ONCE) {
    reads.push(...await Promise.all(shown.slice(index, index + CHART_READ_AT_ONCE)
      .map((id) => chartHistory(id, since))));
  }
  return {
    entries: reads.flatMap((read) => read.entries),
    complete: reads.every((read) => read.complete) && shown.length === jobIds.length,
    jobsRead: shown.length,
  };
}

// --- binning ------------------------------------------------------------------------------

function outcomeOf(entry) {
  if (entry.status === "Completed") return "Completed";
  if (entry.status === "Failed") return "Failed";
  return "Postponed or skipped";
}

// Bins fall on whole hours (whole quarters of a UTC day for a week), the last one holding now.
function periodStart(now, period) {
  return Math.ceil(now / period.bin) * period.bin - period.span;
}

function binsOf(entries, now, period) {
  const start = periodStart(now, period);
  const count = Math.round(period.span / period.bin);
  const bins = Array.from({ length: count }, (_, index) => ({
    from: start + index * period.bin,
    counts: Object.fromEntries(OUTCOME_KINDS.map((kind) => [kind.name, 0])),
    lateness: null, // the highest in the bin, in ms
    response: null,
  }));
  for (const entry of entries) {
    const at = Date.parse(entry.startTime);
    if (!(at >= start && at <= now)) continue;
    const bin = bins[Math.min(count - 1, Math.floor((at - start) / period.bin))];
    const outcome = outcomeOf(entry);
    bin.counts[outcome] += 1;
    if (outcome === "Postponed or skipped") continue;
    bin.response = Math.max(bin.response ?? 0, Date.parse(entry.endTime) - at);
    // Lateness is measured on an occurrence's first try: a retry is due after its interval.
    if (entry.retryCount === 0 && entry.actionName !== "ErrorAction") {
      bin.lateness = Math.max(bin.lateness ?? 0, Math.max(0, at - Date.parse(entry.expectedExecutionTime)));
    }
  }
  return bins;
}

// --- drawing ------------------------------------------------------------------------------

function binLabel(from, period) {
  const text = exactTime(new Date(from).toISOString());
  return period.bin < 24 * 3600000 && period.span <= 24 * 3600000 ? text.slice(11, 16) : text.slice(5, 16);
}

function patterns(prefix) {
  return svg("defs", {},
    svg("pattern", { id: `${prefix}-hatch`, width: 6, height: 6, patternUnits: "userSpaceOnUse",
      patternTransform: "rotate(45)" },
    svg("rect", { width: 6, height: 6, fill: "#c62828" }),
    svg("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#ffffff", "stroke-width": 2 })),
    svg("pattern", { id: `${prefix}-dots`, width: 5, height: 5, patternUnits: "userSpaceOnUse" },
      svg("rect", { width: 5, height: 5, fill: "#6d4c9f" }),
      svg("circle", { cx: 2.5, cy: 2.5, r: 1.2, fill: "#ffffff" })));
}

function fillOf(kind, prefix) {
  return kind.pattern ? `url(#${prefix}-${kind.pattern})` : kind.colour;
}

function niceTop(value) {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((step) => step * power).find((top) => top >= value);
}

function frame(top, unit, bins, period, titleId, title) {
  const inner = { w: CHART_WIDTH - CHART_MARGIN.left - CHART_MARGIN.right,
    h: CHART_HEIGHT - CHART_MARGIN.top - CHART_MARGIN.bottom };
  const y = (value) => CHART_MARGIN.top + inner.h - (value / top) * inner.h;
  const x = (index) => CHART_MARGIN.left + (index / bins.length) * inner.w;
  const every = Math.ceil(bins.length / 8);
  const axis = svg("g", { class: "axis", "aria-hidden": "true" },
    [0, top / 2, top].map((value) => svg("g", {},
      svg("line", { x1: CHART_MARGIN.left, x2: CHART_WIDTH - CHART_MARGIN.right, y1: y(value), y2: y(value),
        stroke: "#c8c8c8" }),
      svg("text", { x: CHART_MARGIN.left - 6, y: y(value) + 4, "text-anchor": "end" },
        `${Number.isInteger(value) ? value : value.toFixed(1)}${unit}`))),
    bins.map((bin, index) => index % every ? null : svg("text", {
      x: x(index), y: CHART_HEIGHT - 8, "text-anchor": "start" }, binLabel(bin.from, period))));
  const drawing = svg("svg", { viewBox: `0 0 ${CHART_WIDTH} ${CHART_HEIGHT}`, role: "img",
    "aria-labelledby": titleId, class: "chart" }, svg("title", { id: titleId }, title), axis);
  return { drawing, x, y, inner };
}

function outcomesChart(bins, period, prefix) {
  const totals = Object.fromEntries(OUTCOME_KINDS.map((kind) =>
    [kind.name, bins.reduce((sum, bin) => sum + bin.counts[kind.name], 0)]));
  // At least 2, so that the axis counts in whole runs.
  const top = Math.max(2, niceTop(Math.max(...bins.map((bin) => Object.values(bin.counts).reduce((a, b) => a + b, 0)))));
  const words = OUTCOME_KINDS.map((kind) => `${totals[kind.name]} ${kind.name.toLowerCase()}`).join(", ");
  const { drawing, x, y, inner } = frame(top, "", bins, period, `${prefix}-outcomes-title`,
    `Runs by outcome, per ${period.binName}: ${words}`);
  drawing.prepend(patterns(prefix));
  const width = (inner.w / bins.length) * 0.8;
  bins.forEach((bin, index) => {
    let stacked = 0;
    for (const kind of OUTCOME_KINDS) {
      const count = bin.counts[kind.name];
      if (!count) continue;
      drawing.append(svg("rect", { x: x(index) + width * 0.1, width, y: y(stacked + count),
        height: y(stacked) - y(stacked + count), fill: fillOf(kind, prefix), stroke: kind.colour },
      svg("title", {}, `${binLabel(bin.from, period)}: ${count} ${kind.name.toLowerCase()}`)));
      stacked += count;
    }
  });
  const legend = h("ul", { class: "chart-legend" }, OUTCOME_KINDS.map((kind) => h("li", {},
    svgSwatch(kind, prefix), ` ${kind.name}: ${totals[kind.name]}`)));
  return h("figure", { class: "chart-figure" }, drawing, h("figcaption", {}, legend));
}

function svgSwatch(kind, prefix) {
  return svg("svg", { width: 14, height: 14, viewBox: "0 0 14 14", "aria-hidden": "true" },
    svg("rect", { width: 14, height: 14, fill: fillOf(kind, prefix), stroke: kind.colour }));
}

function timesChart(bins, period, prefix) {
  const highest = Math.max(0, ...bins.flatMap((bin) => [bin.lateness ?? 0, bin.response ?? 0]));
  const seconds = highest >= 2000;
  const scale = seconds ? 1000 : 1;
  const unit = seconds ? " s" : " ms";
  const top = niceTop(highest / scale);
  const { drawing, x, y, inner } = frame(top, unit, bins, period, `${prefix}-times-title`,
    `Highest lateness and response time per ${period.binName}`);
  const middle = (index) => x(index) + inner.w / bins.length / 2;
  const series = [
    { key: "lateness", name: "Lateness (due time to call)", colour: "#1565c0", dash: null, marker: "circle" },
    { key: "response", name: "Response time (call to answer)", colour: "#e65100", dash: "6 4", marker: "square" },
  ];
  for (const line of series) {
    const points = bins.map((bin, index) => bin[line.key] === null ? null
      : [middle(index), y(bin[line.key] / scale), bin]).filter(Boolean);
    if (points.length > 1) {
      drawing.append(svg("polyline", { points: points.map(([px, py]) => `${px},${py}`).join(" "),
        fill: "none", stroke: line.colour, "stroke-width": 2, "stroke-dasharray": line.dash }));
    }
    for (const [px, py, bin] of points) {
      const label = `${binLabel(bin.from, period)}: ${line.name.split(" (")[0].toLowerCase()} ` +
        `${formatMs(bin[line.key])}`;
      drawing.append(line.marker === "circle"
        ? svg("circle", { cx: px, cy: py, r: 4, fill: line.colour }, svg("title", {}, label))
        : svg("rect", { x: px - 4, y: py - 4, width: 8, height: 8, fill: line.colour }, svg("title", {}, label)));
    }
  }
  const legend = h("ul", { class: "chart-legend" }, series.map((line) => h("li", {},
    svg("svg", { width: 28, height: 14, viewBox: "0 0 28 14", "aria-hidden": "true" },
      svg("line", { x1: 0, y1: 7, x2: 28, y2: 7, stroke: line.colour, "stroke-width": 2,
        "stroke-dasharray": line.dash }),
      line.marker === "circle" ? svg("circle", { cx: 14, cy: 7, r: 4, fill: line.colour })
        : svg("rect", { x: 10, y: 3, width: 8, height: 8, fill: line.colour })),
    ` ${line.name}`)));
  return h("figure", { class: "chart-figure" }, drawing, h("figcaption", {}, legend));
}

function formatMs(value) {
  if (value === null) return "";
  return value >= 2000 ? `${(value / 1000).toFixed(1)} s` : `${Math.round(value)} ms`;
}

function chartTable(bins, period) {
  const rows = bins.filter((bin) => Object.values(bin.counts).some(Boolean)).reverse()
    .map((bin) => h("tr", {},
      h("td", {}, binLabel(bin.from, period)),
      OUTCOME_KINDS.map((kind) => h("td", { class: "number" }, String(bin.counts[kind.name]))),
      h("td", { class: "number" }, formatMs(bin.lateness)),
      h("td", { class: "number" }, formatMs(bin.response))));
  return h("details", { class: "chart-numbers" },
    h("summary", {}, "The numbers behind the charts"),
    rows.length ? h("table", {},
      h("caption", {}, `Per ${period.binName} (UTC), newest first`),
      h("thead", {}, h("tr", {}, ["From", ...OUTCOME_KINDS.map((kind) => kind.name), "Highest lateness",
        "Highest response time"].map((text) => h("th", { scope: "col" }, text)))),
      h("tbody", {}, rows)) : h("p", { class: "empty" }, "No runs in this period."));
}

// The charts' section for the jobs named (one job's page, or a collection's).
export async function historyCharts(jobIds) {
  const period = CHART_PERIODS[charts_.period];
  const now = Date.now();
  const { entries, complete, jobsRead } = await chartEntries(jobIds, periodStart(now, period));
  const bins = binsOf(entries, now, period);
  const prefix = "chart";
  const choices = h("div", { class: "chart-periods", role: "group", "aria-label": "Period" },
    Object.entries(CHART_PERIODS).map(([key, choice]) => h("button", {
      type: "button", "aria-pressed": String(key === charts_.period), "data-focus": `period:${key}`,
      onclick: () => { charts_.period = key; refresh(); },
    }, choice.label)));
  const partial = complete ? null : h("p", { class: "explain" },
    jobsRead < jobIds.length
      ? `Drawn from the history of the first ${jobsRead} of ${jobIds.length} jobs.`
      : "Drawn from each job's newest 1,000 history entries, which do not reach back over the whole period.");
  return h("section", { class: "charts", "aria-labelledby": "charts-title", "data-key": "charts" },
    h("div", { class: "heading" }, h("h2", { id: "charts-title" }, `Runs: ${period.label.toLowerCase()}`),
      choices),
    outcomesChart(bins, period, prefix),
    timesChart(bins, period, prefix),
    partial,
    h("p", { class: "explain" }, "From the jobs' history. Times are UTC; point at a bar or a mark " +
      "for its numbers. Lateness counts each occurrence's first try only."),
    chartTable(bins, period));
}
