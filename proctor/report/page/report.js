/* Proctor's report page: inflates the embedded figures, draws the plots with Plotly, and
   runs the rollout table (filter, sort, pages) and its drill-down. Every text that comes
   from a record (ids, patches, outputs) is set with textContent, never parsed as HTML. */
"use strict";

const MAX_TASKS_PLOTTED = 60;
const PAGE = 100;
const VERDICT_COLORS = { PASS: "#2e8b57", WARN: "#d39b16", FAIL: "#c0392b",
                         violation: "#7b1fa2", error: "#6c757d" };
const CONFIG = { displaylogo: false, responsive: true };
/* Distinct colours for up to 24 series (Plotly's Alphabet palette). */
const COLORWAY = ["#AA0DFE", "#3283FE", "#85660D", "#782AB6", "#565656", "#1C8356", "#16FF32",
  "#F7E1A0", "#E2E2E2", "#1CBE4F", "#C4451C", "#DEA0FD", "#FE00FA", "#325A9B", "#FEAF16",
  "#F8A19F", "#90AD1C", "#F6222E", "#1CFFCE", "#2ED9FF", "#B10DA1", "#C075A6", "#FC1CBF", "#B00068"];
const LABEL_CHARS = 40;
/* Ids as axis labels: Plotly reads "<b>" in a label as markup, so < > & are escaped; long
   ids are cut (their start and end kept); an empty task id is named. */
function label(s, chars = LABEL_CHARS) {
  let t = (s === "" || s === null || s === undefined) ? "(no task)" : String(s);
  if (t.length > chars) t = t.slice(0, chars - 12) + "..." + t.slice(-9);
  return t.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
/* Labels for a list of ids, distinct even when two cut ids would read the same. */
function labels(ids) {
  const seen = new Map();
  return ids.map(id => {
    let t = label(id);
    const n = (seen.get(t) || 0) + 1;
    seen.set(t, n);
    return n > 1 ? `${t} (${n})` : t;
  });
}
const CAT = { type: "category", automargin: true };
let queued = [];  // plots drawn once every section is laid out (their width is final)

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined)
    node.append(c instanceof Node ? c : String(c));
  return node;
}

function fmt(x, digits = 3) {
  if (x === null || x === undefined) return "-";
  if (typeof x === "number") return Number.isInteger(x) ? String(x) : x.toFixed(digits);
  return String(x);
}
const pct = x => (x === null || x === undefined) ? "-" : (100 * x).toFixed(1) + " %";

async function inflate() {
  const b64 = document.getElementById("proctor-data").textContent.trim();
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

function plot(container, id, title, traces, layout, note) {
  const box = el("div", {});
  box.append(el("h3", { text: title }));
  if (note) box.append(el("p", { class: "muted", text: note }));
  const div = el("div", { id, class: "plot" });
  box.append(div);
  container.append(box);
  const lay = Object.assign({ margin: { t: 24, r: 16, b: 60, l: 60 }, height: 340,
                              legend: { orientation: "h", y: -0.22 }, colorway: COLORWAY }, layout || {});
  const points = t => ["x", "y", "z"].reduce((n, k) => n + (Array.isArray(t[k]) ? t[k].length : 0), 0);
  if (!traces.some(t => points(t) > 0))
    lay.annotations = [{ text: "no data", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5,
                         font: { size: 16, color: "#5d6778" } }];
  const draw = () => Plotly.newPlot(div, traces, lay, CONFIG).then(() => { div.dataset.rendered = "1"; });
  if (queued) queued.push(draw); else draw();
  return div;
}

function section(title, id) {
  const s = el("section", { id });
  s.append(el("h2", { text: title }));
  document.getElementById("main").append(s);
  return s;
}

function plottedTasks(tasks) {
  const sorted = [...tasks].sort((a, b) => b.rollouts - a.rollouts).slice(0, MAX_TASKS_PLOTTED);
  sorted.sort((a, b) => a.task_id < b.task_id ? -1 : 1);
  const note = tasks.length > MAX_TASKS_PLOTTED
    ? `${MAX_TASKS_PLOTTED} of ${tasks.length} tasks plotted (those with the most rollouts); the task table lists all.`
    : null;
  return [sorted, note];
}

function header(data) {
  const t = data.totals;
  const src = data.source || {};
  document.getElementById("source").textContent =
    `${src.path || ""} - ${src.lines ?? t.rollouts} lines, ${t.rollouts} records`;
  const kpis = document.getElementById("kpis");
  const items = [["rollouts", t.rollouts], ["scored", t.scored],
    ["mean reward", fmt(t.reward.mean, 4)], ["reward sd", fmt(t.reward.sd, 4)],
    ["violations", t.violations], ["errors", t.errors],
    ["excluded from advantage", t.excluded],
    ["flat GRPO groups", data.groups.measured ? pct(data.groups.flat_share) : "-"],
    ["cache hits", t.cache_hits]];
  for (const [k, v] of items) kpis.append(el("div", { class: "kpi" }, el("b", { text: String(v) }), k));
  const notices = document.getElementById("notices");
  for (const s of (src.skipped || [])) {
    notices.append(el("div", { class: "notice", text:
      `skipped ${s.count} line${s.count > 1 ? "s" : ""}: ${s.reason} (line ${s.lines.join(", ")}${s.count > s.lines.length ? ", ..." : ""})` }));
  }
}

function rewardsSection(data) {
  const s = section("Rewards", "rewards");
  const grid = el("div", { class: "grid" });
  s.append(grid);
  const byVerdict = {};
  data.rows.forEach(r => {
    const v = r[data.col.verdict], x = r[data.col.reward];
    if (x === null) return;
    (byVerdict[v] = byVerdict[v] || []).push(x);
  });
  const traces = Object.keys(VERDICT_COLORS).filter(v => byVerdict[v]).map(v => ({
    type: "histogram", x: byVerdict[v], name: v, marker: { color: VERDICT_COLORS[v] },
    xbins: { size: 0.05 } }));
  plot(grid, "plot-reward-hist", "Reward histogram (scored rollouts, by verdict)", traces,
       { barmode: "stack", xaxis: { title: "reward" }, yaxis: { title: "rollouts" } });
  const [tasks, note] = plottedTasks(data.tasks);
  const names = labels(tasks.map(t => t.task_id));
  plot(grid, "plot-task-box", "Reward per task", tasks.map((t, i) => ({
    type: "box", y: t.rewards, x: t.rewards.map(() => names[i]), name: names[i],
    boxpoints: t.rewards.length <= 200 ? "all" : "outliers", jitter: 0.4, pointpos: 0, showlegend: false })),
    { yaxis: { title: "reward" }, xaxis: CAT }, note);
}

function componentsSection(data) {
  const s = section("Components and rates", "components");
  const grid = el("div", { class: "grid" });
  s.append(grid);
  const [tasks, note] = plottedTasks(data.tasks);
  const comps = data.components;
  const z = tasks.map(t => comps.map(c => t.components[c].mean));
  const text = tasks.map(t => comps.map(c => {
    const m = t.components[c];
    return m.n ? `${m.mean.toFixed(3)} +/- ${m.sd.toFixed(3)} (n=${m.n})` : "not measured";
  }));
  plot(grid, "plot-components", "Mean of every component per task (hover: mean +/- sd)", [{
    type: "heatmap", x: comps, y: labels(tasks.map(t => t.task_id)), z, text, hoverinfo: "x+y+text",
    zmin: 0, zmax: 1, colorscale: "Viridis" }],
    { height: Math.max(340, 60 + 22 * tasks.length), yaxis: CAT, xaxis: CAT }, note);
  const ids = labels(tasks.map(t => t.task_id));
  plot(grid, "plot-rates", "Violation, error and exclude_from_advantage rates per task", [
    { type: "bar", name: "violation", x: ids, y: tasks.map(t => t.violation_rate), marker: { color: VERDICT_COLORS.violation } },
    { type: "bar", name: "error", x: ids, y: tasks.map(t => t.error_rate), marker: { color: VERDICT_COLORS.error } },
    { type: "bar", name: "exclude_from_advantage", x: ids, y: tasks.map(t => t.exclude_rate), marker: { color: "#e67e22" } },
  ], { barmode: "group", yaxis: { title: "share of rollouts", tickformat: ".0%", range: [0, 1] }, xaxis: CAT }, note);
}

function timeSection(data) {
  const s = section("Time", "time");
  const grid = el("div", { class: "grid" });
  s.append(grid);
  const [tasks, note] = plottedTasks(data.tasks);
  const phases = data.phases;
  const overlap = "Phases overlap (the hidden suite and mutation run beside the public one), so they may add to more than a rollout's total.";
  const names = labels(tasks.map(t => t.task_id));
  if (tasks.length <= 8) {
    plot(grid, "plot-phases", "Mean seconds per phase per task (cache hits left out)",
      tasks.map((t, i) => ({ type: "bar", orientation: "h", name: names[i], y: phases,
                             x: phases.map(p => t.phases[p] ?? 0) })),
      { barmode: "group", height: Math.max(340, 40 + 18 * phases.length * Math.min(tasks.length, 4)),
        xaxis: { title: "seconds" }, yaxis: Object.assign({ autorange: "reversed" }, CAT) },
      (note ? note + " " : "") + overlap);
  } else {
    plot(grid, "plot-phases", "Mean seconds per phase per task (cache hits left out)", [{
      type: "heatmap", x: phases, y: names, z: tasks.map(t => phases.map(p => t.phases[p] ?? null)),
      colorscale: "Blues", hovertemplate: "%{y}<br>%{x}: %{z:.2f} s<extra></extra>" }],
      { height: Math.max(340, 80 + 22 * tasks.length), xaxis: CAT, yaxis: CAT },
      (note ? note + " " : "") + overlap);
  }
  /* Where the time went, in parts that do not overlap: the patch's code running (any step
     that runs or reads it, in either sandbox), the harness's own operations, and the rest
     of the total (e.g. waiting for a sandbox slot). Every phase is in the hover text. */
  const slow = data.slowest;
  const ids = labels(slow.map(r => r.rollout_id));
  const hover = slow.map(r => Object.entries(r.phases).sort((a, b) => b[1] - a[1])
    .map(([p, v]) => `${p}: ${v.toFixed(2)} s`).join("<br>"));
  const parts = [["patch's code", r => r.patch_code_s], ["harness", r => r.harness_ops_s],
    ["other (slot wait, ...)", r => Math.max(0, r.total_s - r.patch_code_s - r.harness_ops_s)]];
  plot(grid, "plot-slowest", `Slowest ${slow.length} rollouts and where their time went`,
    parts.map(([name, get], k) => ({ type: "bar", orientation: "h", name, y: ids, x: slow.map(get),
      text: hover, customdata: slow.map(r => label(r.rollout_id, 200)),
      hovertemplate: "%{customdata}<br>" + name + ": %{x:.2f} s<br><br>%{text}<extra></extra>",
      textposition: "none", marker: { color: ["#c0392b", "#4472c4", "#bbbbbb"][k] } })),
    { barmode: "stack", height: Math.max(340, 60 + 22 * slow.length), xaxis: { title: "seconds" },
      yaxis: Object.assign({ autorange: "reversed" }, CAT) },
    "Hover for every phase's seconds (phases overlap, so they are not stacked).");
}

function groupsSection(data) {
  const g = data.groups;
  const s = section("GRPO groups", "groups");
  s.append(el("p", { text: g.measured
    ? `${g.measured} groups with 2 or more rewards (of ${g.groups}); ${g.flat} (${pct(g.flat_share)}) have all rewards equal and carry no advantage signal.`
    : "No group has 2 or more scored rewards (rollouts without group_id are in no group)." }));
  if (!g.measured) return;
  const grid = el("div", { class: "grid" });
  s.append(grid);
  plot(grid, "plot-group-spread", "Reward spread within groups (population sd)", [{
    type: "histogram", x: g.rows.map(r => r.spread), marker: { color: "#4472c4" } }],
    { xaxis: { title: "sd of the group's rewards" }, yaxis: { title: "groups" } });
  const per = {};
  g.rows.forEach(r => { const t = (per[r.task_id] = per[r.task_id] || [0, 0]); t[0] += r.flat ? 1 : 0; t[1] += 1; });
  const all = Object.keys(per).sort();
  const ids = all.slice(0, MAX_TASKS_PLOTTED);
  plot(grid, "plot-group-flat", "Share of flat groups per task", [{
    type: "bar", x: labels(ids), y: ids.map(t => per[t][0] / per[t][1]), marker: { color: "#8e44ad" },
    text: ids.map(t => `${per[t][0]} of ${per[t][1]}`), hoverinfo: "x+text", textposition: "none" }],
    { yaxis: { tickformat: ".0%", range: [0, 1] }, xaxis: CAT },
    all.length > ids.length ? `${ids.length} of ${all.length} tasks plotted (the first by name).` : null);
}

function sortable(table, columns, rows, render) {
  let key = null, dir = 1;
  const head = el("tr", {});
  columns.forEach(([label, get, num]) => {
    const th = el("th", { text: label, class: num ? "num" : "" });
    th.addEventListener("click", () => {
      dir = key === label ? -dir : 1; key = label;
      head.querySelectorAll("th").forEach(h => h.classList.remove("sorted-asc", "sorted-desc"));
      th.classList.add(dir > 0 ? "sorted-asc" : "sorted-desc");
      rows.sort((a, b) => compare(get(a), get(b), dir));
      render();
    });
    head.append(th);
  });
  table.append(el("thead", {}, head));
}

/* Order of two cells in direction dir (1 or -1); empty cells last either way. */
function compare(a, b, dir) {
  if (a === b) return 0;
  if (a === null || a === undefined) return 1;
  if (b === null || b === undefined) return -1;
  return (a < b ? -1 : 1) * dir;
}

function tasksSection(data) {
  const s = section("Tasks", "tasks");
  s.append(el("p", { class: "muted", text: "Click a task for its reward histogram." }));
  const table = el("table", { id: "task-table" });
  const comps = data.components;
  const cols = [["task", t => t.task_id], ["rollouts", t => t.rollouts, 1], ["scored", t => t.scored, 1],
    ["mean reward", t => t.reward.mean, 1], ["sd", t => t.reward.sd, 1],
    ["violations", t => t.violation_rate, 1], ["errors", t => t.error_rate, 1],
    ["excluded", t => t.exclude_rate, 1]].concat(comps.map(c => [c, t => t.components[c].mean, 1]));
  const rows = [...data.tasks];
  const body = el("tbody", {});
  const hist = el("div", {});
  const draw = () => {
    body.replaceChildren(...rows.map(t => {
      const tr = el("tr", { class: "rollout" },
        el("td", { text: t.task_id }), el("td", { class: "num", text: t.rollouts }),
        el("td", { class: "num", text: t.scored }), el("td", { class: "num", text: fmt(t.reward.mean, 4) }),
        el("td", { class: "num", text: fmt(t.reward.sd, 4) }), el("td", { class: "num", text: pct(t.violation_rate) }),
        el("td", { class: "num", text: pct(t.error_rate) }), el("td", { class: "num", text: pct(t.exclude_rate) }),
        ...comps.map(c => { const m = t.components[c];
          return el("td", { class: "num", title: m.n ? `sd ${m.sd.toFixed(3)}, n ${m.n}` : "not measured", text: fmt(m.mean) }); }));
      tr.addEventListener("click", () => taskHistogram(hist, t));
      return tr;
    }));
  };
  sortable(table, cols, rows, draw);
  table.append(body);
  draw();
  s.append(el("div", { style: "max-height: 480px; overflow: auto" }, table), hist);
}

function taskHistogram(box, t) {
  box.replaceChildren();
  plot(box, "plot-task-hist", `Reward histogram: ${t.task_id}`, [{
    type: "histogram", x: t.rewards, xbins: { size: 0.05 }, marker: { color: "#4472c4" } }],
    { xaxis: { title: "reward" }, yaxis: { title: "rollouts" } },
    `${t.scored} scored of ${t.rollouts}; mean ${fmt(t.reward.mean, 4)}, sd ${fmt(t.reward.sd, 4)}`);
}

function compareSection(data) {
  const c = data.compare;
  const s = section(`Compared with ${c.other_name}`, "compare");
  s.append(el("p", { text: `mean reward ${fmt(c.this_total.reward.mean, 4)} here (${c.this_name}), ` +
    `${fmt(c.other_total.reward.mean, 4)} there (${c.other_name}); rollouts paired by ${c.paired_by}: ${c.paired}` +
    (c.ambiguous ? `; ${c.ambiguous} records not paired: their key is not unique in their run.` : ".") }));
  const grid = el("div", { class: "grid" });
  s.append(grid);
  const both = c.tasks.filter(t => t.delta !== null);
  const tasks = both.slice(0, MAX_TASKS_PLOTTED);
  plot(grid, "plot-compare", "Mean reward per task: this run - the other", [{
    type: "bar", x: labels(tasks.map(t => t.task_id)), y: tasks.map(t => t.delta),
    marker: { color: tasks.map(t => t.delta >= 0 ? "#2e8b57" : "#c0392b") },
    text: tasks.map(t => `${fmt(t.other, 4)} -> ${fmt(t.this, 4)}`), hoverinfo: "x+y+text", textposition: "none" }],
    { yaxis: { title: "delta of mean reward" }, xaxis: CAT },
    both.length > tasks.length ? `${tasks.length} of ${both.length} tasks plotted (the first by name).`
      : (both.length ? null : "No task has scored rollouts in both runs."));
  const box = el("div", {});
  grid.append(box);
  box.append(el("h3", { text: `${c.changed.length} rollouts whose verdict changed` }));
  const table = el("table", { id: "changed-table" });
  const rows = [...c.changed];
  const body = el("tbody", {});
  const draw = () => body.replaceChildren(...rows.map(r => el("tr", {},
    el("td", { text: r.key }), el("td", { text: r.task_id }),
    el("td", {}, el("span", { class: `badge ${r.other}`, text: r.other })),
    el("td", {}, el("span", { class: `badge ${r.this}`, text: r.this })),
    el("td", { class: "num", text: fmt(r.other_reward, 4) }), el("td", { class: "num", text: fmt(r.this_reward, 4) }))));
  sortable(table, [["rollout", r => r.key], ["task", r => r.task_id], ["other", r => r.other],
    ["this", r => r.this], ["other reward", r => r.other_reward, 1], ["this reward", r => r.this_reward, 1]], rows, draw);
  table.append(body);
  draw();
  box.append(el("div", { style: "max-height: 300px; overflow: auto" }, table));
}

function rolloutsSection(data) {
  const C = data.col;
  const s = section("Rollouts", "rollouts");
  const all = data.rows.map((r, i) => ({ r, i }));
  let shown = all, page = 0;
  const text = el("input", { id: "filter-text", type: "search", placeholder: "rollout, task, group, reason..." });
  const options = (id, label, values) => {
    const sel = el("select", { id }, el("option", { value: "", text: `${label}: all` }));
    values.forEach(v => sel.append(el("option", { value: "=" + v, text: v === "" ? "(no task)" : v })));
    return sel;
  };
  const distinct = i => [...new Set(data.rows.map(r => r[i]).filter(v => v !== null))].sort();
  const verdict = options("filter-verdict", "verdict", distinct(C.verdict));
  const task = options("filter-task", "task", distinct(C.task_id));
  const flag = options("filter-flag", "flag", [...new Set(data.rows.flatMap(r => r[C.flags]))].sort());
  const count = el("span", { class: "muted" });
  s.append(el("div", { class: "filters" }, text, verdict, task, flag, count));
  const table = el("table", { id: "rollout-table" });
  const body = el("tbody", {});
  const pager = el("div", { class: "pager" });
  const drill = el("div", { id: "drill-box" });
  const cols = [["rollout", x => x.r[C.rollout_id]], ["task", x => x.r[C.task_id]],
    ["group", x => x.r[C.group_id]], ["#", x => x.r[C.sample_index], 1], ["verdict", x => x.r[C.verdict]],
    ["reward", x => x.r[C.reward], 1], ["score", x => x.r[C.score], 1], ["reason", x => x.r[C.reason]],
    ["flags", x => x.r[C.flags].join(" ")], ["seconds", x => x.r[C.seconds], 1]];
  const draw = () => {
    const start = page * PAGE;
    body.replaceChildren(...shown.slice(start, start + PAGE).map(x => {
      const r = x.r;
      const tr = el("tr", { class: "rollout", "data-row": x.i },
        el("td", { text: r[C.rollout_id] }), el("td", { text: r[C.task_id] }), el("td", { text: r[C.group_id] ?? "" }),
        el("td", { class: "num", text: r[C.sample_index] ?? "" }),
        el("td", {}, el("span", { class: `badge ${r[C.verdict]}`, text: r[C.verdict] })),
        el("td", { class: "num", text: fmt(r[C.reward], 4) }), el("td", { class: "num", text: fmt(r[C.score], 1) }),
        el("td", { text: r[C.reason] ?? "" }), el("td", { text: r[C.flags].join(" ") }),
        el("td", { class: "num", text: (r[C.cache_hit] ? "cached " : "") + fmt(r[C.seconds], 2) }));
      tr.addEventListener("click", () => {
        body.querySelectorAll("tr.selected").forEach(t => t.classList.remove("selected"));
        tr.classList.add("selected");
        drillDown(drill, data, x.i);
      });
      return tr;
    }));
    const pages = Math.max(1, Math.ceil(shown.length / PAGE));
    count.textContent = `${shown.length} of ${all.length} rollouts`;
    pager.replaceChildren(
      el("button", { id: "page-prev", onclick: () => { if (page > 0) { page--; draw(); } } }, "previous"),
      el("span", { text: `page ${page + 1} of ${pages}` }),
      el("button", { id: "page-next", onclick: () => { if (page < pages - 1) { page++; draw(); } } }, "next"));
  };
  const refilter = () => {
    const q = text.value.trim().toLowerCase();
    shown = all.filter(({ r }) =>
      (!verdict.value || "=" + r[C.verdict] === verdict.value) && (!task.value || "=" + r[C.task_id] === task.value) &&
      (!flag.value || r[C.flags].some(f => "=" + f === flag.value)) &&
      (!q || [r[C.rollout_id], r[C.task_id], r[C.group_id], r[C.reason]].some(v => v && String(v).toLowerCase().includes(q))));
    page = 0;
    draw();
  };
  [text, verdict, task, flag].forEach(n => n.addEventListener("input", refilter));
  sortable(table, cols, all, refilter);
  table.append(body);
  s.append(table, pager, drill);
  draw();
}

function kv(pairs) {
  const dl = el("dl", { class: "kv" });
  for (const [k, v] of pairs) dl.append(el("dt", { text: k }), el("dd", {}, v instanceof Node ? v : fmt(v, 4)));
  return dl;
}

function diffView(text) {
  const pre = el("pre", { class: "diff" });
  for (const line of text.split("\n")) {
    let cls = "";
    if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ") || line.startsWith("index ")) cls = "meta";
    else if (line.startsWith("@@")) cls = "hunk";
    else if (line.startsWith("+")) cls = "add";
    else if (line.startsWith("-")) cls = "del";
    pre.append(el("span", { class: cls, text: line || " " }));
  }
  return pre;
}

function testTable(tests) {
  const table = el("table", {});
  table.append(el("thead", {}, el("tr", {}, el("th", { text: "test" }), el("th", { text: "outcome" }))));
  const body = el("tbody", {});
  for (const [id, outcome] of Object.entries(tests))
    body.append(el("tr", {}, el("td", { text: id }), el("td", { class: `outcome-${outcome}`, text: outcome })));
  table.append(body);
  return table;
}

function drillDown(box, data, i) {
  const C = data.col, r = data.rows[i], d = data.details[i];
  const root = el("section", { id: "drill" });
  root.append(el("h2", { text: `Rollout ${r[C.rollout_id]}` }));
  root.append(kv([["task", r[C.task_id]], ["group / sample", `${r[C.group_id] ?? "-"} / ${r[C.sample_index] ?? "-"}`],
    ["status", r[C.status]], ["reward", r[C.reward]], ["reason", r[C.reason] ?? "-"],
    ["progress", d.progress], ["diff cost", d.diff_cost], ["apply strategy", d.apply_strategy ?? "-"]]));
  if (d.verdict) {
    root.append(el("h3", { text: "Gate" }));
    root.append(kv([["verdict", el("span", { class: `badge ${d.verdict.gate}`, text: d.verdict.gate })],
      ["score", d.verdict.score], ["deciding rule", d.verdict.rule || "-"],
      ["blockers", d.verdict.blockers.length ? d.verdict.blockers.join("; ") : "none"]]));
  }
  if (d.error) {
    root.append(el("h3", { text: "Error (no reward)" }));
    root.append(kv([["kind", d.error.kind], ["message", d.error.message], ["retryable", String(d.error.retryable)]]));
  }
  root.append(el("h3", { text: "Components" }));
  root.append(kv(Object.keys(d.components).map(c => [c,
    `${fmt(d.components[c])}  (weight ${fmt(d.weights[c])})${d.component_notes[c] ? "  " + d.component_notes[c] : ""}`])));
  root.append(el("h3", { text: "Penalties" }));
  root.append(d.penalties.length ? kv(d.penalties.map(p => [p.name,
    `-${fmt(p.amount, 4)}` + (p.indicator !== null ? ` = ${fmt(p.weight)} x indicator ${fmt(p.indicator)}` : "") + (p.rule ? `: ${p.rule}` : "")]))
    : el("p", { class: "muted", text: "none" }));
  root.append(el("h3", { text: "Flags" }));
  root.append(d.flags.length ? kv(d.flags.map(f => [f.name, f.rule])) : el("p", { class: "muted", text: "none set" }));
  root.append(el("h3", { text: "Integrity" }));
  root.append(kv([["violated", String(d.integrity.violated)],
    ["reasons", d.integrity.reasons.length ? d.integrity.reasons.join("; ") : "none"],
    ["paths", d.integrity.paths.join(", ") || "-"]]));
  root.append(el("h3", { text: "Patch" }));
  const ref = r[C.patch];
  if (ref !== null && ref in data.patches) {
    root.append(data.patches[ref] ? diffView(data.patches[ref]) : el("p", { class: "muted", text: "(the empty patch)" }));
  } else {
    root.append(el("p", { class: "muted", text: data.patches_given
      ? "No patch given has this record's SHA-256 (the rollouts file's patch for it is missing, not UTF-8, or not the one scored)."
      : "The records do not carry patches; give the rollouts file (proctor report --rollouts) to see them." }));
  }
  for (const [suite, t] of Object.entries(d.tests)) {
    root.append(el("h3", { text: `Tests: ${suite} (FAIL_TO_PASS ${t.f2p_passed}/${t.f2p_total} passed, PASS_TO_PASS ${t.p2p_failed}/${t.p2p_total} broken)` }));
    root.append(el("details", { open: "" }, el("summary", { text: "FAIL_TO_PASS" }), testTable(t.fail_to_pass)));
    root.append(el("details", {}, el("summary", { text: `PASS_TO_PASS not passing (${Object.keys(t.pass_to_pass_not_passed).length})` }),
      testTable(t.pass_to_pass_not_passed)));
  }
  root.append(el("h3", { text: "Evidence" }));
  for (const [name, ev] of Object.entries(d.evidence)) {
    root.append(el("details", {}, el("summary", { text: `${name}: exit ${fmt(ev.exit_code)}, ${fmt(ev.duration_s, 2)} s` }),
      kv([["command", el("pre", { text: ev.command })], ["output", el("pre", { text: ev.output || "(none)" })],
          ["details", el("pre", { text: ev.details })]])));
  }
  root.append(el("h3", { text: "Timing (seconds)" }));
  root.append(kv(Object.entries(d.timing)));
  root.append(el("details", {}, el("summary", { text: "Environment and metadata" }),
    kv(Object.entries(d.env).concat([["metadata", d.metadata ?? "-"]]))));
  box.replaceChildren(root);
  root.scrollIntoView({ block: "start" });
}

async function main() {
  const data = await inflate();
  data.col = Object.fromEntries(data.columns.map((c, i) => [c, i]));
  document.getElementById("loading").remove();
  header(data);
  rewardsSection(data);
  componentsSection(data);
  timeSection(data);
  groupsSection(data);
  if (data.compare) compareSection(data);
  tasksSection(data);
  rolloutsSection(data);
  const draws = queued.splice(0).map(draw => draw());
  queued = null;  // plots made later (a task's histogram) draw at once
  await Promise.all(draws);
  window.proctorReadyMs = performance.now();
  document.body.dataset.ready = "1";
}

main().catch(err => {
  document.body.dataset.ready = "error";
  const main = document.getElementById("main");
  main.append(el("p", { class: "notice", text: `The report could not be drawn: ${err}` }));
  throw err;
});
