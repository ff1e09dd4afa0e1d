// skilltransfer view: runs, tasks, trajectories, skills, transfer and comparisons, read from run logs.
// Every string from a run folder is untrusted: it reaches the page only as text (textContent, text nodes,
// attribute values set through the DOM), never as markup. Links are routes this file builds.
"use strict";
(function () {
  const MODE = document.body.dataset.mode === "static" ? "static" : "server";
  const main = document.getElementById("main");
  const crumbs = document.getElementById("crumbs");
  const statusLine = document.getElementById("status");
  const state = { timings: {}, renders: 0 };
  window.__stv = state;

  // ------------------------------------------------------------------------------------------- DOM helpers
  function add(el, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    setProps(el, props);
    return add(el, children);
  }

  const SVG = "http://www.w3.org/2000/svg";
  function s(tag, props, ...children) {
    const el = document.createElementNS(SVG, tag);
    setProps(el, props);
    return add(el, children);
  }

  function setProps(el, props) {
    if (!props) return;
    for (const [key, value] of Object.entries(props)) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") el.setAttribute("class", value);
      else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, String(value));
    }
  }

  function clear(el) {
    while (el.firstChild) el.removeChild(el.firstChild);
    return el;
  }

  // ------------------------------------------------------------------------------------------- routes
  const enc = encodeURIComponent;
  const route = {
    runs: () => "#/",
    run: (key) => `#/run/${enc(key)}`,
    tab: (key, tab) => `#/run/${enc(key)}/${tab}`,
    task: (key, position) => `#/run/${enc(key)}/task/${no(Number(position))}`,
    skill: (key, id) => `#/run/${enc(key)}/skill/${enc(id)}`,
    compare: (a, b, taskId) => `#/compare/${enc(a)}/${enc(b)}` + (taskId === undefined ? "" : `/${enc(taskId)}`),
    report: (key) => `#/report/${enc(key)}`,
  };

  function link(href, ...children) {
    return h("a", { href }, ...children);
  }

  // ------------------------------------------------------------------------------------------- data
  const pending = new Map();
  window.__stv_deliver = function (key, data) {
    const waiter = pending.get(key);
    if (waiter) {
      pending.delete(key);
      waiter.resolve(data);
    }
  };

  const cache = new Map();
  // a single-file export carries every payload in one JSON block (not a script: no other page can load it)
  const bundled = (() => {
    const block = document.getElementById("stv-data");
    return block ? JSON.parse(block.textContent) : null;
  })();
  function load(...parts) {
    const key = parts.map(String).join("/");
    if (bundled) {
      return Object.prototype.hasOwnProperty.call(bundled, key) ? Promise.resolve(bundled[key])
        : Promise.reject(new Error(`no data for ${key} in this export`));
    }
    if (MODE === "static" && cache.has(key)) return cache.get(key);
    let promise;
    if (MODE === "server") {
      promise = fetch("api/" + parts.map((p) => enc(String(p))).join("/"), { cache: "no-store" }).then((r) =>
        r.ok ? r.json() : r.text().then((t) => Promise.reject(new Error(t || r.statusText))));
    } else {
      promise = new Promise((resolve, reject) => {
        pending.set(key, { resolve });
        const script = document.createElement("script");
        script.src = "data/" + parts.map((p) => String(p).replace(/[^A-Za-z0-9_-]/g, "_")).join("/") + ".js";
        script.onerror = () => {
          pending.delete(key);
          reject(new Error(`no data file for ${key} in this export`));
        };
        script.onload = () => script.remove();
        document.head.append(script);
      });
      cache.set(key, promise);
    }
    return promise;
  }

  // A task's trajectory as ATIF: served by the local server, written beside the data of a folder export; a
  // single-file export has none.
  function atifHref(key, position) {
    if (bundled) return null;
    return MODE === "server" ? `atif/${enc(key)}/${Number(position)}.json`
      : `atif/${String(key).replace(/[^A-Za-z0-9_-]/g, "_")}/${Number(position)}.json`;
  }

  function figureSrc(key) {
    if (bundled) return bundled["figure/" + key] || "";
    return MODE === "server" ? `figure/${enc(key)}.png` : `figures/${key.replace(/[^A-Za-z0-9_-]/g, "_")}.png`;
  }

  // ------------------------------------------------------------------------------------------- formatting
  const pct = (x) => (x === null || x === undefined ? "-" : (100 * x).toFixed(1) + "%");
  const num = (x, digits = 0) => (x === null || x === undefined ? "-" : Number(x).toLocaleString("en-US", {
    maximumFractionDigits: digits, minimumFractionDigits: digits }));
  const no = (position) => Number(position) + 1;  // task numbers are 1-based where people read them (as in show)
  const usd = (x) => (x === null || x === undefined ? "-" : "$" + Number(x).toFixed(Number(x) < 1 ? 4 : 2));
  const secs = (x) => (x === null || x === undefined ? "-" : Number(x).toFixed(Number(x) < 10 ? 2 : 1) + " s");

  function outcomeBadge(task) {
    if (!task || task.finished === false) return h("span", { class: "badge pending" }, task ? task.status : "pending");
    return h("span", { class: "badge " + (task.success ? "ok" : "fail") }, task.success ? "success" : "failure");
  }

  function pre(text, cls) {
    return h("pre", { class: cls || "text" }, text === null || text === undefined ? "" : String(text));
  }

  function codeBlock(tokens, text) {
    const code = h("code", { class: "py" });
    if (tokens) {
      for (const [kind, part] of tokens) code.append(kind ? h("span", { class: "t" + kind }, part) : part);
    } else {
      code.append(String(text || ""));
    }
    return h("pre", { class: "code" }, code);
  }

  function foldText(text, limit = 1500) {
    text = String(text === null || text === undefined ? "" : text);
    if (text.length <= limit) return pre(text);
    const shown = pre(text.slice(0, limit) + "…");
    const button = h("button", { class: "small", type: "button" }, `show all ${num(text.length)} characters`);
    button.addEventListener("click", () => {
      shown.textContent = text;
      button.remove();
    });
    return h("div", null, shown, button);
  }

  function valueNode(value) {
    if (value === null || value === undefined) return h("span", { class: "muted" }, "-");
    if (typeof value === "string") return value.includes("\n") || value.length > 120 ? foldText(value) : value;
    if (typeof value === "number" || typeof value === "boolean") return String(value);
    return pre(JSON.stringify(value, null, 1));
  }

  function fields(obj, skip) {
    const keys = Object.keys(obj || {}).filter((k) => !(skip || []).includes(k));
    if (!keys.length) return null;
    return h("dl", { class: "fields" }, keys.map((k) => [h("dt", null, k), h("dd", null, valueNode(obj[k]))]));
  }

  function setCrumbs(...items) {
    clear(crumbs);
    items.forEach((item, i) => {
      if (i) crumbs.append(" / ");
      crumbs.append(item instanceof Node ? item : document.createTextNode(String(item)));
    });
  }

  // ------------------------------------------------------------------------------------------- tables
  // columns: {label, value(row) for sorting/filtering, cell(row) -> node|string, num}
  function dataTable(columns, rows, opts = {}) {
    const wrap = h("div", { class: "tablewrap" });
    const table = h("table", { class: "data" + (opts.cls ? " " + opts.cls : "") });
    const thead = h("thead");
    const body = h("tbody");
    let sortIndex = opts.sort === undefined ? -1 : opts.sort;
    let ascending = opts.ascending !== false;
    let filter = opts.filter || (() => true);
    const headRow = h("tr");
    columns.forEach((col, index) => {
      const th = h("th", { class: col.num ? "num" : null, title: col.help || null }, col.label);
      if (col.value) {
        th.classList.add("sortable");
        th.addEventListener("click", () => {
          ascending = sortIndex === index ? !ascending : true;
          sortIndex = index;
          fill();
        });
      }
      headRow.append(th);
    });
    thead.append(headRow);
    function fill() {
      const start = performance.now();
      let shown = rows.filter((row) => filter(row));
      if (sortIndex >= 0) {
        const col = columns[sortIndex];
        shown = shown.slice().sort((a, b) => {
          const x = col.value(a), y = col.value(b);
          const order = x === y ? 0 : x === null || x === undefined ? 1 : y === null || y === undefined ? -1 : x < y ? -1 : 1;
          return ascending ? order : -order;
        });
      }
      const fragment = document.createDocumentFragment();
      for (const row of shown) {
        const tr = h("tr", opts.rowClass ? { class: opts.rowClass(row) } : null);
        for (const col of columns) tr.append(h("td", { class: col.num ? "num" : null }, col.cell(row)));
        fragment.append(tr);
      }
      clear(body).append(fragment);
      table.dataset.rows = String(shown.length);
      thead.querySelectorAll("th").forEach((th, i) => {
        th.dataset.sorted = i === sortIndex ? (ascending ? "asc" : "desc") : "";
      });
      if (opts.timing) state.timings[opts.timing] = performance.now() - start;
      if (opts.onFill) opts.onFill(shown.length);
    }
    table.append(thead, body);
    wrap.append(table);
    fill();
    wrap.refilter = (f) => {
      filter = f;
      fill();
    };
    return wrap;
  }

  function rowText(columns, row) {
    return columns.map((c) => (c.value ? String(c.value(row) ?? "") : "")).join(" ").toLowerCase();
  }

  function filterBox(placeholder, onChange) {
    const input = h("input", { type: "search", placeholder, class: "filter", "aria-label": placeholder });
    input.addEventListener("input", () => onChange(input.value.trim().toLowerCase()));
    return input;
  }

  // ------------------------------------------------------------------------------------------- runs page
  async function runsPage() {
    setCrumbs("runs");
    const index = await load("index");
    const selected = new Set();
    const compareButton = h("button", { type: "button", disabled: "" }, "compare the 2 selected runs");
    compareButton.addEventListener("click", () => {
      const [a, b] = [...selected];
      location.hash = route.compare(a, b);
    });
    const columns = [
      { label: "", cell: (r) => {
        const box = h("input", { type: "checkbox", "aria-label": "select " + r.label, "data-key": r.key });
        box.addEventListener("change", () => {
          if (box.checked) selected.add(r.key); else selected.delete(r.key);
          compareButton.disabled = selected.size !== 2;
        });
        return box;
      } },
      { label: "run", value: (r) => r.label, cell: (r) => h("a", { href: route.run(r.key), class: "path" }, breakable(r.label)),
        help: "the run folder, from the folder given (a grid's runs under its folder)" },
      { label: "condition", value: (r) => r.condition, cell: (r) => h("span", { class: "path" }, breakable(r.condition)),
        help: "the condition as report labels it among these runs: +library(top) a frozen (filtered) library, " +
          "[setting=value] what sets runs of the same labels apart" },
      { label: "model", value: (r) => r.model, cell: (r) => r.model },
      { label: "preset", value: (r) => r.preset || "", cell: (r) => h("span", { title: r.harness || null }, r.preset || "-") },
      { label: "env", value: (r) => r.env, cell: envCell },
      { label: "library", value: (r) => r.library || "", cell: libraryCell,
        help: "the skills the run retrieved from: a frozen library (as report's tables name it) or its own memory; " +
          "the library's mean utility when the run has it (a --library-filter run's ranking, or a scores.json)" },
      { label: "tasks", num: true, value: (r) => r.finished, cell: (r) => `${r.finished}/${r.planned}` },
      { label: "success [95% CI]", num: true, value: (r) => r.success,
        cell: (r) => r.finished ? [pct(r.success), h("span", { class: "ci" }, ` [${pct(r.ci[0])}, ${pct(r.ci[1])}]`)] : "-" },
      { label: "reward", num: true, value: (r) => r.mean_reward, cell: (r) => num(r.mean_reward, 3) },
      { label: breakable("tokens/task"), num: true, value: (r) => r.tokens_per_task, cell: (r) => num(r.tokens_per_task) },
      { label: "cost", num: true, value: (r) => r.cost_usd, cell: (r) => usd(r.cost_usd),
        help: "the finished tasks' cost at the model's price (- without one)" },
      { label: breakable("latency/task"), num: true, value: (r) => r.latency_mean_s, cell: (r) => secs(r.latency_mean_s) },
      { label: "calls", num: true, value: (r) => r.model_calls, cell: (r) => num(r.model_calls) },
      { label: "transfers", num: true, value: (r) => r.transfers + (r.library_transfers || 0),
        cell: (r) => (r.library_transfers ? `${num(r.transfers)} + ${num(r.library_transfers)} library` : num(r.transfers)),
        help: "transfer events (once per task and skill): a task retrieved a skill an earlier task of the run induced; + library: a skill of the run's frozen library (another run's memory or a given library)" },
      { label: "skills", num: true, value: (r) => r.memory_size, cell: (r) => num(r.memory_size) },
    ];
    const count = h("span", { class: "muted" });
    const table = dataTable(columns, index.runs, { cls: "runs", timing: "runs",
      onFill: (n) => { count.textContent = `${n} of ${index.runs.length} runs`; } });
    const parts = [
      h("h1", null, "Runs"),
      h("p", { class: "muted" }, "from " + index.paths.join(", ") + " · read " + index.generated),
      h("div", { class: "toolbar" }, filterBox("filter runs (any column)", (text) =>
        table.refilter((r) => !text || rowText(columns, r).includes(text))), count, compareButton),
      table,
    ];
    if (index.problems.length) {
      parts.push(h("h2", null, "Not shown"), h("ul", { class: "problems" },
        index.problems.map((p) => h("li", null, h("code", null, p.path), ": ", p.error))));
    }
    if (index.grids.length) {
      parts.push(h("h2", null, "Grids"), h("ul", null, index.grids.map((g) => {
        const states = {};
        for (const value of Object.values(g.streams || {})) states[value] = (states[value] || 0) + 1;
        const text = Object.entries(states).map(([k, v]) => `${v} ${k}`).join(", ");
        return h("li", null, h("code", null, g.label), g.name ? ` (${g.name})` : "", text ? `: streams ${text}` : "",
          g.updated ? ` · status of ${g.updated}` : "", g.error ? ` · ${g.error}` : "");
      })));
    }
    if ((index.reports || []).length) {
      parts.push(h("h2", null, "Reports"), h("ul", { class: "reports" }, index.reports.map((r) =>
        h("li", null, link(route.report(r.key), r.label)))));
    }
    if (index.figures.length) {
      parts.push(h("h2", null, "Report figures"), h("div", { class: "figures" }, index.figures.map((f) =>
        h("figure", null, h("img", { src: figureSrc(f.key), alt: f.label, loading: "lazy" }),
          h("figcaption", null, f.label)))));
    }
    add(clear(main), parts);
  }

  // Text with a line break allowed after each / + | , = and before each [ (run folders, labels, library paths).
  function breakable(text) {
    return String(text ?? "").split(/(?<=[/+|,=])|(?=\[)/).flatMap((part, i) => (i ? [h("wbr"), part] : [part]));
  }

  // The env's label (as report names it), its settings folded under it.
  function envCell(r) {
    const label = r.env_label || r.env;
    if (!r.env || r.env === label) return label;
    return h("details", { class: "env" }, h("summary", null, label), h("span", { class: "path muted" }, breakable(r.env)));
  }

  // The library a run read, and its mean utility when the run has it (never computed by the viewer).
  function libraryCell(r) {
    if (!r.library) return h("span", { class: "muted" }, "-");
    const u = r.library_utility;
    let line = null;
    if (u && u.mean !== null && u.mean !== undefined) {
      const what = u.source === "library_filter"
        ? `${u.filter} ${u.skills} of ${u.library_skills}` + (u.library_mean !== null ? `; all ${u.library_mean.toFixed(3)}` : "")
        : `${u.skills} skills, ${u.source}`;
      const help = u.source === "library_filter"
        ? `mean utility of the ${u.skills} skills the run kept (--library-filter ${u.filter}), as it ranked the ` +
          `${u.library_skills} of the library against its ${u.tasks} tasks when it started (config.json); all: the whole library's mean`
        : `mean utility of the ${u.skills} skills of the run folder's ${u.source} (skilltransfer score)`;
      line = h("div", { class: "utility muted", title: help }, `utility ${u.mean.toFixed(3)} (${what})`);
    }
    return [h("span", { class: "path" }, breakable(r.library)), line];
  }

  // ------------------------------------------------------------------------------------------- run page
  function runHeader(run, tab) {
    setCrumbs(link(route.runs(), "runs"), run.label);
    const tabs = [["tasks", `tasks (${run.finished}/${run.planned})`], ["skills", `skills (${run.skills.length})`],
      ["graph", `transfer graph (${run.transfers.length})`], ["summary", "summary"], ["config", "config"]];
    return [
      h("h1", null, run.label),
      h("p", { class: "lede", title: run.harness || null }, `${run.condition} · ${run.model} · ${run.env}` + (run.preset ? ` · preset ${run.preset}` : "") +
        ` · success ${run.finished ? pct(run.success) + " [" + pct(run.ci[0]) + ", " + pct(run.ci[1]) + "]" : "-"}` +
        (run.cost_usd !== null && run.cost_usd !== undefined ? ` · cost ${usd(run.cost_usd)}` : "")),
      h("nav", { class: "tabs" }, tabs.map(([name, label]) =>
        h("a", { href: name === "tasks" ? route.run(run.key) : route.tab(run.key, name),
          class: name === tab ? "active" : null }, label))),
    ];
  }

  function skillLink(run, id, name) {
    return run.skills.some((s) => s.id === id) ? link(route.skill(run.key, id), name) : h("span", {
      title: "not in the run's final memory" }, name);
  }

  async function runPage(key, tab, arg) {
    const run = await load("run", key);
    const parts = runHeader(run, tab === "skill" ? "skills" : tab);
    if (tab === "tasks") parts.push(tasksView(run));
    else if (tab === "skills") parts.push(skillsView(run));
    else if (tab === "skill") parts.push(skillView(run, arg));
    else if (tab === "graph") parts.push(graphView(run));
    else if (tab === "summary") parts.push(h("dl", { class: "fields" }, run.summary.map(([k, v]) => [h("dt", null, k), h("dd", null, pre(v))])));
    else if (tab === "config") parts.push(pre(JSON.stringify(run.config, null, 2)));
    else parts.push(h("p", null, "No such view."));
    add(clear(main), parts);
  }

  function tasksView(run) {
    const events = new Map(run.transfers.map((e) => [`${e.target}:${e.skill_id}`, e]));
    const event = (t, r) => events.get(`${t.position}:${r.skill_id}`);  // the transfer event of a retrieval, if any
    const from = (t, r) => {  // where a transferred skill came from: the inducing task, or the frozen library
      const e = event(t, r);
      if (!e) return null;
      if (e.kind === "library") return [" ← ", h("span", { title: e.library || "" }, "library")];
      return [" ← ", link(route.task(run.key, e.source), "#" + no(e.source))];
    };
    const columns = [
      { label: "#", num: true, value: (t) => t.position, cell: (t) => String(no(t.position)) },
      { label: "task", value: (t) => t.task_id, cell: (t) => h("a", { href: route.task(run.key, t.position), class: "nowrap" }, t.task_id) },
      { label: "outcome", value: (t) => (t.finished ? (t.success ? 1 : 0) : -1), cell: (t) => outcomeBadge(t) },
      { label: "reward", num: true, value: (t) => t.reward, cell: (t) => t.finished ? num(t.reward, 2) : "" },
      { label: "exit status", value: (t) => t.exit_status || t.status, cell: (t) => t.exit_status || "" },
      { label: "steps", num: true, value: (t) => t.steps, cell: (t) => t.finished ? String(t.steps) : "" },
      { label: "tokens", num: true, value: (t) => t.tokens, cell: (t) => t.finished ? num(t.tokens) : "" },
      { label: "cost", num: true, value: (t) => t.cost_usd, cell: (t) => t.finished ? usd(t.cost_usd) : "" },
      { label: "latency", num: true, value: (t) => t.latency_s, cell: (t) => t.finished ? secs(t.latency_s) : "" },
      { label: "retrieved (score)", value: (t) => (t.retrieved || []).map((r) => r.name).join(" "),
        cell: (t) => h("ul", { class: "inline" }, (t.retrieved || []).map((r) => h("li", {
          class: event(t, r) ? "transfer" : null },
        skillLink(run, r.skill_id, r.name), ` ${r.score.toFixed(2)}`, from(t, r)))) },
      { label: "picked", value: (t) => (t.picks || []).map((p) => p.name).join(" "),
        cell: (t) => pickList(run, t.picks) },
      { label: "induced", value: (t) => (t.induced || []).map((i) => i.skill_name || i.status).join(" "),
        cell: (t) => h("ul", { class: "inline" }, (t.induced || []).map((i) => h("li", null,
          i.skill_id && ["added", "merged"].includes(i.status) ? skillLink(run, i.target_id && i.status === "merged" ? i.target_id : i.skill_id, i.skill_name || i.skill_id) : (i.skill_name || ""),
          h("span", { class: "muted" }, ` ${i.status}`)))) },
    ];
    let outcome = "all";
    let text = "";
    const count = h("span", { class: "muted" });
    const tasks = run.tasks.slice().sort((a, b) => a.position - b.position);
    const table = dataTable(columns, tasks, { cls: "tasks", timing: "tasks", sort: 0,
      rowClass: (t) => (t.finished ? (t.success ? "ok" : "fail") : "pending"),
      onFill: (n) => { count.textContent = `${n} of ${tasks.length} tasks`; } });
    const apply = () => table.refilter((t) => (outcome === "all" || (outcome === "success" && t.finished && t.success)
      || (outcome === "failure" && t.finished && !t.success) || (outcome === "unfinished" && !t.finished))
      && (!text || rowText(columns, t).includes(text)));
    const buttons = ["all", "success", "failure", "unfinished"].map((name) => {
      const b = h("button", { type: "button", class: name === outcome ? "small active" : "small", "data-outcome": name }, name);
      b.addEventListener("click", () => {
        outcome = name;
        buttons.forEach((x) => x.classList.toggle("active", x === b));
        apply();
      });
      return b;
    });
    return h("section", null, h("div", { class: "toolbar" }, buttons, filterBox("filter tasks", (t) => {
      text = t;
      apply();
    }), count), table);
  }

  // ------------------------------------------------------------------------------------------- skills
  function skillsView(run) {
    if (run.skills_error) return h("p", { class: "error" }, run.skills_error);
    if (!run.skills.length) return h("p", { class: "muted" }, "This run has no skill memory.");
    const columns = [
      { label: "skill", value: (s) => s.name, cell: (s) => h("a", { href: route.skill(run.key, s.id), class: "skillname" }, s.name) },
      { label: "format", value: (s) => s.format, cell: (s) => s.format },
      { label: "level", value: (s) => s.level, cell: (s) => s.level },
      { label: "source task", value: (s) => (s.induced_at ? s.induced_at.position : s.provenance.stream_position),
        cell: (s) => s.induced_at ? link(route.task(run.key, s.induced_at.position), `#${no(s.induced_at.position)} ${s.induced_at.task_id}`)
          : (s.provenance.source_task_id || "-") },
      { label: "retrieved", num: true, value: (s) => s.retrieved_by.length, cell: (s) => String(s.retrieved_by.length) },
      { label: "transfers", num: true, value: (s) => s.retrieved_by.filter((u) => u.transfer).length,
        cell: (s) => String(s.retrieved_by.filter((u) => u.transfer).length) },
      { label: "solved when retrieved", num: true, value: (s) => s.retrieved_by.filter((u) => u.success).length,
        cell: (s) => `${s.retrieved_by.filter((u) => u.success).length}/${s.retrieved_by.length}` },
      { label: "utility", num: true, value: utilityOf, cell: (s) => (utilityOf(s) !== null ? utilityOf(s).toFixed(3) : "-"),
        help: "from the run folder's scores.json (skilltransfer score), else as the run's --library-filter ranked its library" },
      { label: "effect on success", num: true, value: (s) => (s.effect && s.effect.success ? s.effect.success[0] : null),
        cell: (s) => effectCell(s.effect) },
      { label: "description", value: (s) => s.description, cell: (s) => h("div", { class: "desc" }, foldLine(s.description, 320)) },
    ];
    const table = dataTable(columns, run.skills, { cls: "skills" });
    return h("section", null, h("div", { class: "toolbar" }, filterBox("filter skills", (text) =>
      table.refilter((s) => !text || rowText(columns, s).includes(text)))), table);
  }

  function utilityOf(skill) {
    const value = skill.scores && typeof skill.scores.utility === "number" ? skill.scores.utility : skill.library_utility;
    return typeof value === "number" ? value : null;
  }

  // A long line shown up to ``limit`` characters, the rest on demand.
  function foldLine(text, limit) {
    text = String(text ?? "");
    if (text.length <= limit) return text;
    const shown = h("span", null, text.slice(0, limit) + "… ");
    const button = h("button", { class: "small", type: "button" }, `${num(text.length)} characters: show all`);
    button.addEventListener("click", () => {
      shown.textContent = text;
      button.remove();
    });
    return [shown, button];
  }

  // A skill's causal effect from randomised masking (report table skill_effects): success estimate, CI, flag.
  function effectCell(effect) {
    if (!effect || !effect.success) return "-";
    const [est, low, high] = effect.success;
    const ci = low === null ? "" : ` [${low.toFixed(2)}, ${high.toFixed(2)}]`;
    return h("span", { class: effect.harmful ? "harmful" : null }, `${est >= 0 ? "+" : ""}${est.toFixed(2)}${ci}${effect.harmful ? " harmful" : ""}`);
  }

  function effectView(effect) {
    if (!effect) return h("p", { class: "muted" }, "No masking draws (a run with mask_rate > 0 estimates the skill's causal effect).");
    const rows = ["success", "reward", "steps", "tokens"].filter((k) => effect[k]).map((k) => {
      const [est, low, high] = effect[k];
      return [h("dt", null, k), h("dd", null, `${est.toFixed(3)}` + (low === null ? "" : ` (95% CI ${low.toFixed(3)} to ${high.toFixed(3)})`))];
    });
    return [h("p", { class: effect.harmful ? "harmful" : null }, `Shown in ${effect.shown} and withheld in ${effect.withheld} of the ${effect.candidates} tasks that retrieved it` +
      (effect.p_harm === null ? "." : `; p(harm) = ${effect.p_harm.toFixed(4)}${effect.harmful ? ", flagged harmful (Benjamini-Hochberg, FDR 0.05)." : "."}`)),
      rows.length ? h("dl", { class: "fields effect" }, rows) : h("p", { class: "muted" }, "Both arms are needed for an estimate.")];
  }

  function skillView(run, id) {
    const skill = run.skills.find((s) => s.id === id);
    if (!skill) return h("p", { class: "error" }, `No skill ${id} in this run's final memory.`);
    const scores = skill.scores ? h("dl", { class: "fields" }, Object.entries(skill.scores).map(([k, v]) =>
      [h("dt", null, k), h("dd", null, v === null || v === undefined ? "-" : typeof v === "number" ? v.toFixed(3) : String(v))]))
      : h("p", { class: "muted" }, "Not scored (scores.json in the run folder from skilltransfer score gives utility, specificity and abstractness).");
    const uses = dataTable([
      { label: "#", num: true, value: (u) => u.position, cell: (u) => String(no(u.position)) },
      { label: "task", value: (u) => u.task_id, cell: (u) => link(route.task(run.key, u.position), u.task_id) },
      { label: "score", num: true, value: (u) => u.score, cell: (u) => u.score.toFixed(3) },
      { label: "outcome", value: (u) => u.success, cell: (u) => outcomeBadge({ finished: true, success: u.success }) },
      { label: "reward", num: true, value: (u) => u.reward, cell: (u) => num(u.reward, 2) },
      { label: "transfer", value: (u) => u.transfer, cell: (u) => (!u.transfer ? "" : u.transfer_kind === "library" ? "library" : "yes") },
      { label: "subtask", num: true, value: (u) => u.subtask_index, cell: (u) => (u.subtask_index === null ? "" : String(u.subtask_index)) },
    ], skill.retrieved_by, { cls: "uses", sort: 0 });
    const source = skill.induced_at ? h("p", null, "Induced by task ", link(route.task(run.key, skill.induced_at.position),
      `#${no(skill.induced_at.position)} ${skill.induced_at.task_id}`), ` (${skill.induced_at.status}).`)
      : h("p", { class: "muted" }, "Source: ", skill.provenance.source_task_id || "unknown", " (not a task of this run).");
    return h("section", { class: "skill" },
      h("h2", null, skill.name, " ", h("span", { class: "muted" }, `${skill.format} · ${skill.level} · ${skill.id}`)),
      h("p", null, skill.description), source,
      skill.signature ? h("p", null, "Signature: ", h("code", null, skill.signature)) : null,
      skill.inputs ? h("p", null, h("strong", null, "Inputs: "), skill.inputs) : null,
      skill.outputs ? h("p", null, h("strong", null, "Outputs: "), skill.outputs) : null,
      skill.format === "code" ? codeBlock(skill.code, skill.body) : pre(skill.body, "text body"),
      h("h3", null, `Retrieved by ${skill.retrieved_by.length} tasks`), uses,
      h("h3", null, "Causal effect (randomised masking)"), effectView(skill.effect),
      h("h3", null, "Scores"), scores,
      typeof skill.library_utility === "number" ? h("p", null, `Utility as the run's --library-filter ranked its library ` +
        `(against the run's tasks, config.json): ${skill.library_utility.toFixed(3)}`) : null,
      h("h3", null, "Usage and provenance"), fields({ ...skill.usage, ...skill.provenance }),
      Object.keys(skill.extra || {}).length ? [h("h3", null, "Other fields"), fields(skill.extra)] : null);
  }

  // ------------------------------------------------------------------------------------------- transfer graph
  function graphView(run) {
    const within = run.transfers.filter((e) => e.kind !== "library");  // older payloads have no kind: within-run
    const library = run.transfers.filter((e) => e.kind === "library");
    const tasks = run.tasks.slice().sort((a, b) => a.position - b.position);
    const n = Math.max(tasks.length, 1);
    const step = Math.max(8, Math.min(60, 900 / n));
    const left = 30, width = left * 2 + step * (n - 1);
    const reach = Math.max(0, ...within.map((e) => (step * (e.target - e.source)) / 2));
    const base = Math.max(70, Math.min(240, reach + 30));  // tall enough for the widest arc
    const byPosition = new Map(tasks.map((t) => [t.position, t]));
    const x = (position) => left + step * position;
    const svg = s("svg", { class: "transfer", width, height: base + 50, viewBox: `0 0 ${width} ${base + 50}`,
      role: "img", "aria-label": `transfer graph: ${within.length} edges between ${tasks.length} tasks` });
    for (const edge of within) {
      const x1 = x(edge.source), x2 = x(edge.target);
      const rx = Math.max((x2 - x1) / 2, 1), ry = Math.min(rx, base - 20);
      const path = s("path", { d: `M ${x1} ${base} A ${rx} ${ry} 0 0 1 ${x2} ${base}`,
        class: "edge " + (edge.success ? "ok" : "fail"), "data-source": edge.source, "data-target": edge.target },
      s("title", null, `task ${no(edge.source)} → task ${no(edge.target)}: ${edge.skill_name} (score ${edge.score.toFixed(3)}, target ${edge.success ? "solved" : "failed"})`));
      path.addEventListener("click", () => { location.hash = route.task(run.key, edge.target); });
      svg.append(path);
    }
    for (const task of tasks) {
      const cls = "node " + (!task.finished ? "pending" : task.success ? "ok" : "fail");
      const node = s("a", { href: route.task(run.key, task.position), class: "nodelink" },
        s("circle", { cx: x(task.position), cy: base, r: Math.max(3, Math.min(7, step / 3)), class: cls,
          "data-position": task.position }),
        s("title", null, `#${no(task.position)} ${task.task_id}: ${task.finished ? (task.success ? "success" : "failure") : task.status}`));
      svg.append(node);
      const every = Math.ceil(24 / step);
      if (task.position % every === 0) {
        svg.append(s("text", { x: x(task.position), y: base + 22, class: "tick" }, String(no(task.position))));
      }
    }
    void byPosition;
    const legend = h("p", { class: "legend" }, h("span", { class: "swatch ok" }), " into a solved task ",
      h("span", { class: "swatch fail" }, ""), " into a failed task · tasks in stream order, left to right; an arc runs ",
      "from the task that induced a skill to a later task that retrieved it. Click a task or an arc.");
    const edges = dataTable([
      { label: "source", num: true, value: (e) => e.source, cell: (e) => link(route.task(run.key, e.source), `#${no(e.source)} ${e.source_task_id}`) },
      { label: "skill", value: (e) => e.skill_name, cell: (e) => skillLink(run, e.skill_id, e.skill_name) },
      { label: "target", num: true, value: (e) => e.target, cell: (e) => link(route.task(run.key, e.target), `#${no(e.target)} ${e.target_task_id}`) },
      { label: "score", num: true, value: (e) => e.score, cell: (e) => e.score.toFixed(3) },
      { label: "target outcome", value: (e) => e.success, cell: (e) => outcomeBadge({ finished: true, success: e.success }) },
    ], within, { cls: "edges", sort: 2 });
    const parts = within.length ? [legend, h("div", { class: "graphwrap" }, svg), h("h3", null, `${within.length} transfer events`), edges]
      : [h("p", { class: "muted" }, "No task retrieved a skill induced earlier in this run."), h("div", { class: "graphwrap" }, svg)];
    if (library.length) {
      const sources = [...new Set(library.map((e) => e.library))].join(", ");
      parts.push(h("h3", null, `${library.length} library transfer events`),
        h("p", { class: "legend" }, `Tasks retrieved skills of the run's frozen library (${sources}): skills no task of this run induced. Source task: where the skill was induced, in the run it came from.`),
        dataTable([
          { label: "skill", value: (e) => e.skill_name, cell: (e) => skillLink(run, e.skill_id, e.skill_name) },
          { label: "source task", value: (e) => e.source_task_id, cell: (e) => e.source_task_id || "-" },
          { label: "target", num: true, value: (e) => e.target, cell: (e) => link(route.task(run.key, e.target), `#${no(e.target)} ${e.target_task_id}`) },
          { label: "score", num: true, value: (e) => e.score, cell: (e) => e.score.toFixed(3) },
          { label: "target outcome", value: (e) => e.success, cell: (e) => outcomeBadge({ finished: true, success: e.success }) },
        ], library, { cls: "edges library", sort: 2 }));
    }
    return h("section", null, parts);
  }

  // ------------------------------------------------------------------------------------------- trajectories
  const KNOWN = {
    RetrievalStep: ["type", "query", "query_kind", "subtask_index", "skills", "route", "below_min_score"],
    PlanStep: ["type", "subtask_index", "decision", "subtask", "reply", "prompt_id", "prompt_tokens", "completion_tokens", "refused_reply", "refused"],
    ActionStep: ["type", "index", "subtask_index", "reply", "thought", "action", "observation", "error", "format_error", "done",
      "prompt_tokens", "completion_tokens", "latency_s", "stuck", "refused", "window"],
    SummaryStep: ["type", "subtask_index", "summary", "prompt_id", "prompt_tokens", "completion_tokens", "status", "dropped"],
    InductionStep: ["type", "subtask_index", "prompt_id", "status", "skill_id", "skill_name", "target_id", "reason", "reply",
      "prompt_tokens", "completion_tokens"],
    MessageStep: ["type", "source", "message", "window"],
  };

  function callLine(call, index) {
    const fit = call.context_fit;
    const fitted = fit && (fit.elided_steps || fit.dropped_steps || fit.cut_skills || fit.elided_replies ||
                           fit.shortened_skills)
      ? ` · fitted to ${num(fit.window)} tokens (${fit.elided_steps || 0} steps elided, ${fit.dropped_steps || 0} dropped, ${fit.shortened_skills || 0} skills shortened, ${fit.cut_skills || 0} cut)` : "";
    return `call ${index} · ${call.role}` + (call.window ? ` (window ${call.window})` : "") +
      ` · ${num(call.prompt_tokens)}+${num(call.completion_tokens)} tokens` +
      (call.reasoning_tokens ? ` (${num(call.reasoning_tokens)} reasoning)` : "") + ` · ${secs(call.latency_s)}` +
      (call.finish_reason ? ` · finish ${call.finish_reason}` : "") + fitted + (call.error ? ` · ${call.error}` : "");
  }

  function promptDetails(payload, index) {
    const call = payload.trajectory.calls[index];
    const details = h("details", { class: "prompt", "data-call": index }, h("summary", null, "prompt and reply: " + callLine(call, index)));
    let filled = false;
    details.addEventListener("toggle", () => {
      if (!details.open || filled) return;
      filled = true;
      const ids = Array.isArray(call.messages) ? call.messages : null;
      if (!ids) {
        details.append(h("p", { class: "muted" }, "Not recorded (a run logged before prompts were kept)."));
        return;
      }
      ids.forEach((id, i) => {
        const message = payload.messages[id];
        details.append(h("div", { class: "message" }, h("div", { class: "role" }, `${i}. ${message ? message.role : "?"}`,
          h("span", { class: "muted" }, " " + id)), message ? foldText(message.content, 4000) : h("p", { class: "error" }, "missing from prompts.jsonl")));
      });
      const thought = typeof call.reasoning === "string" ? payload.messages[call.reasoning] : null;
      if (thought) details.append(h("details", { class: "message reasoning" },
        h("summary", { class: "role" }, "reasoning (kept apart: never sent back to the model)"), foldText(thought.content, 4000)));
      const reply = typeof call.reply === "string" ? payload.messages[call.reply] : null;
      details.append(h("div", { class: "message reply" }, h("div", { class: "role" }, "reply"),
        reply ? foldText(reply.content, 4000) : h("p", { class: "muted" }, "no reply")));
    });
    return details;
  }

  // How the task used a skill a retrieval step shows, as `show --task` says it (the server's `uses`: step -> skill id ->
  // skilltransfer.report.trajectory.use_label): a code skill "ran ×n used" or "not run" (the sandbox's record), a text
  // skill "followed 0.42" (" used" from 0.5); "-" when not measured.
  function useCell(payload, index, k) {
    const label = ((payload.uses || {})[String(index)] || {})[k.id];
    if (typeof label !== "string") return "-";
    return label.endsWith(" used") ? h("span", { class: "used" }, label) : label;
  }

  // A masked retrieval (mask_rate > 0): every candidate with its draw; the withheld ones were not in the prompt.
  function maskView(run, log) {
    const candidates = Array.isArray(log.candidates) ? log.candidates : [];
    const withheld = candidates.filter((c) => !c.shown).length;
    return h("div", { class: "masking" }, h("h4", null, `masking (p = ${log.mask_rate}): ${withheld} of ${candidates.length} candidates withheld`),
      candidates.length ? dataTable([
        { label: "rank", num: true, cell: (c) => String(c.rank) },
        { label: "skill", cell: (c) => skillLink(run, String(c.id), (run.skills.find((k) => k.id === c.id) || { name: String(c.id) }).name) },
        { label: "score", num: true, cell: (c) => Number(c.score).toFixed(3) },
        { label: "P(shown)", num: true, cell: (c) => Number(c.propensity).toFixed(2) },
        { label: "draw", cell: (c) => (c.shown ? "shown" : h("span", { class: "withheld" }, "withheld")) },
      ], candidates, { cls: "mask" }) : null);
  }

  function routeView(route_) {
    const visits = route_.visits || [];
    const keys = [...new Set(visits.flatMap((v) => Object.keys(v)))];
    const rest = { ...route_ };
    delete rest.visits;
    return h("div", { class: "route" }, h("h4", null, `routing (${route_.mode || "lens"}): ${visits.length} units visited`),
      visits.length ? dataTable(keys.map((k) => ({ label: k, value: (v) => (typeof v[k] === "object" ? JSON.stringify(v[k]) : v[k]),
        cell: (v) => valueNode(v[k]) })), visits, { cls: "visits" }) : null,
      h("details", null, h("summary", null, "routing log"), fields(rest)));
  }

  function stepView(run, payload, step, index) {
    const type = step.type || "?";
    const where = step.subtask_index === null || step.subtask_index === undefined ? "" : ` · subtask ${step.subtask_index}`;
    const body = [];
    let title = type;
    let cls = "step";
    if (type === "RetrievalStep") {
      title = `retrieve by ${step.query_kind}${where}`;
      cls += " retrieval";
      body.push(h("p", { class: "query" }, step.query));
      const skills = step.skills || [];
      body.push(skills.length ? dataTable([
        { label: "skill", cell: (k) => skillLink(run, k.id, k.name) },
        { label: "format", cell: (k) => k.format },
        { label: "score", num: true, cell: (k) => Number(k.score).toFixed(3) },
        { label: "use", cell: (k) => useCell(payload, index, k) },
        { label: "source", cell: (k) => k.source === "library" ? `library ${k.library || ""}`.trim()
          : (k.source_position !== null && k.source_position !== undefined && run.tasks.some((t) => t.position === k.source_position && t.task_id === k.source_task_id)
          ? link(route.task(run.key, k.source_position), `#${no(k.source_position)} ${k.source_task_id}`) : (k.source_task_id || "-")) },
        { label: "load error", cell: (k) => k.load_error || "" },
      ], skills, { cls: "retrieved" }) : h("p", { class: "muted" }, "no skills"));
      if (step.below_min_score) body.push(h("p", { class: "muted" }, `${step.below_min_score} more below the minimum score`));
      if (step.route && step.route.kind === "mask") body.push(maskView(run, step.route));
      else if (step.route) body.push(routeView(step.route));
    } else if (type === "PlanStep") {
      title = `plan ${step.subtask_index}: ${step.decision}`;
      cls += " plan";
      if (step.subtask) body.push(h("p", { class: "subtask" }, step.subtask));
      if (step.refused_reply !== null && step.refused_reply !== undefined) {
        body.push(h("div", { class: "refusal" }, h("strong", null, `refused: ${step.refused || "refused"}`), foldText(step.refused_reply)));
      }
    } else if (type === "ActionStep") {
      const flags = ["error", "format_error", "done"].filter((f) => step[f]);
      title = `step ${step.index}${where}` + (step.window ? ` · subagent ${step.window}` : "") + (flags.length ? " · " + flags.join(" ") : "");
      cls += " action" + (step.error || step.format_error ? " failed" : "");
      if (step.refused) body.push(h("div", { class: "refusal" }, h("strong", null, "refused: "), step.refused));
      if (step.stuck) body.push(h("div", { class: "refusal" }, h("strong", null, "stuck: "), step.stuck));
      if (step.action !== null && step.action !== undefined) {
        if (step.thought && step.thought.trim()) body.push(h("div", { class: "thought" }, foldText(step.thought)));
        body.push(codeBlock(payload.code[String(index)], step.action));
      } else {
        body.push(h("div", { class: "reply" }, h("span", { class: "label" }, "reply"), foldText(step.reply)));
      }
      body.push(h("div", { class: "observation" }, h("span", { class: "label" }, "observation"), foldText(step.observation, 3000)));
      if (step.skill_action) body.push(h("div", { class: "skillaction" }, h("span", { class: "label" }, "skill action"), fields(step.skill_action)));
    } else if (type === "SummaryStep") {
      title = `summary ${step.subtask_index}` + (step.status && step.status !== "ok" ? ` · ${step.status}` : "");
      cls += " summary";
      body.push(foldText(step.summary));
      if ((step.dropped || []).length) body.push(h("p", { class: "muted" }, "dropped as ungrounded:"), h("ul", null, step.dropped.map((d) => h("li", null, d))));
    } else if (type === "MessageStep") {
      title = `${step.source} message` + (step.window ? ` · subagent ${step.window}` : "");
      cls += " message";
      body.push(foldText(step.message, 3000));
    } else if (type === "InductionStep") {
      title = `induce${where}: ${step.status}`;
      cls += " induction";
      const id = step.status === "merged" && step.target_id ? step.target_id : step.skill_id;
      body.push(h("p", null, step.skill_name ? ["skill ", id ? skillLink(run, id, step.skill_name) : step.skill_name] : "no skill",
        step.skill_id ? h("span", { class: "muted" }, ` ${step.skill_id}`) : null, step.target_id ? ` → ${step.target_id}` : ""));
      if (step.reason) body.push(h("p", { class: "reason" }, step.reason));
      if (step.reply) body.push(h("details", null, h("summary", null, "the induction reply"), foldText(step.reply, 4000)));
    }
    const other = {};
    const known = KNOWN[type];
    for (const [key, value] of Object.entries(step)) {
      if (!known || !known.includes(key)) {
        if (value !== null && value !== undefined && value !== "" && !(Array.isArray(value) && !value.length)) other[key] = value;
      }
    }
    if (Object.keys(other).length) body.push(h("div", { class: "other" }, fields(other)));
    for (const callIndex of payload.step_calls[String(index)] || []) body.push(promptDetails(payload, callIndex));
    return h("article", { class: cls, id: `step-${index}`, "data-type": type }, h("h3", null, title), body);
  }

  function planGraph(audit, outputs) {
    const nodes = audit.nodes || [];
    const constraints = audit.constraints || [];
    if (!nodes.length) return null;
    const ids = nodes.map((n) => n.id);
    const layer = new Map(ids.map((id) => [id, 0]));
    for (let round = 0; round < ids.length; round++) {
      for (const c of constraints) {
        if (layer.has(c.before) && layer.has(c.after) && layer.get(c.after) <= layer.get(c.before)) layer.set(c.after, layer.get(c.before) + 1);
      }
    }
    const columns = new Map();
    for (const id of ids) {
      const l = layer.get(id);
      if (!columns.has(l)) columns.set(l, []);
      columns.get(l).push(id);
    }
    const W = 190, H = 64, gapX = 60, gapY = 24;
    const pos = new Map();
    let maxRows = 1;
    for (const [l, col] of columns) {
      maxRows = Math.max(maxRows, col.length);
      col.forEach((id, row) => pos.set(id, { x: 10 + l * (W + gapX), y: 10 + row * (H + gapY) }));
    }
    const width = 20 + columns.size * (W + gapX), height = 20 + maxRows * (H + gapY);
    const svg = s("svg", { class: "plan", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "coordination plan" },
      s("defs", null, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }))));
    for (const c of constraints) {
      const a = pos.get(c.before), b = pos.get(c.after);
      if (!a || !b) continue;
      svg.append(s("path", { d: `M ${a.x + W} ${a.y + H / 2} C ${a.x + W + gapX / 2} ${a.y + H / 2}, ${b.x - gapX / 2} ${b.y + H / 2}, ${b.x} ${b.y + H / 2}`,
        class: "dep " + (c.held === false ? "violated" : c.held === null ? "unverified" : "held"), "marker-end": "url(#arrow)" },
      s("title", null, `${c.before} → ${c.after} (${c.kind}): ${c.held === false ? "violated" : c.held === null ? "not exercised" : "held"}${c.detail ? " · " + c.detail : ""}`)));
    }
    for (const node of nodes) {
      const p = pos.get(node.id);
      svg.append(s("g", { class: "plannode " + node.status, transform: `translate(${p.x} ${p.y})` },
        s("rect", { width: W, height: H, rx: 6 }),
        s("text", { x: 8, y: 20, class: "nodeid" }, String(node.id).slice(0, 28)),
        s("text", { x: 8, y: 38 }, (node.skill ? "skill " + node.skill : outputs && outputs[node.id] !== undefined ? "→ " + String(outputs[node.id]) : "").slice(0, 30)),
        s("text", { x: 8, y: 56, class: "muted" }, `${node.status} · ${(node.attempts || []).length} attempts`),
        s("title", null, `${node.id}: ${node.status}${node.skill ? " · " + node.skill : ""}`)));
    }
    return h("div", { class: "graphwrap" }, svg);
  }

  function coordinationView(data) {
    const audit = data.audit || {};
    const plan = data.plan || {};
    return h("section", { class: "coordination" }, h("h2", null, `coordination: ${data.interface}`),
      h("p", null, `plan ${data.plan_fingerprint || plan.fingerprint || ""} · ${plan.written_now ? "written now" : "replayed"}` +
        (plan.fallback ? ` · fallback: ${plan.fallback}` : "") +
        (audit.n_nodes !== undefined ? ` · ${audit.completed_nodes}/${audit.n_nodes} nodes completed, ${audit.violated_constraints} constraints violated, ${audit.unverified_constraints} unverified` : "")),
      planGraph(audit, data.outputs),
      h("details", null, h("summary", null, "audit and node outputs"), fields({ ...audit, outputs: data.outputs, plan })));
  }

  // Picks (results.jsonl picks[]): each skill the agent chose out of those shown, in order, with how (load, read_file,
  // subagent, call, followed), its rank among the candidates and, where the task's right skills are known, right or wrong.
  function pickList(run, picks) {
    if (picks === null || picks === undefined) return h("span", { class: "muted" }, "not recorded");
    if (!picks.length) return h("span", { class: "muted" }, "none");
    const seen = new Set();
    return h("ul", { class: "inline picks" }, picks.filter((p) => !seen.has(`${p.skill_id}:${p.kind}`) && seen.add(`${p.skill_id}:${p.kind}`)).map((p) =>
      h("li", { class: p.right === true ? "right" : p.right === false ? "wrong" : null },
        skillLink(run, p.skill_id, p.name), h("span", { class: "muted" }, ` ${p.kind}${p.rank ? " @" + p.rank : ""}`),
        p.right === true ? " ✓" : p.right === false ? " ✗" : "")));
  }

  function selectionView(run, record) {
    if (!record || record.picks === null || record.picks === undefined) return null;
    const right = new Set(record.relevant_skills || []);
    const known = Array.isArray(record.relevant_skills);
    const draw = record.library_draw;
    const candidates = (record.retrieved || []).map((r, i) => ({ ...r, rank: r.rank || i + 1 }));
    return h("section", { class: "selection" }, h("h2", null, "Selection: shown and picked"),
      draw ? h("p", { class: "muted" }, `This task chose from a library of ${draw.size} skills (asked: ${draw.requested}; ` +
        `${draw.right} right, ${draw.in_band} near misses in the band; nearest neighbour of the right skill: cosine ${draw.nn_cosine === null ? "-" : Number(draw.nn_cosine).toFixed(3)}).`) : null,
      candidates.length ? dataTable([
        { label: "rank", num: true, cell: (c) => String(c.rank) },
        { label: "candidate", cell: (c) => skillLink(run, c.skill_id, c.name) },
        { label: "score", num: true, cell: (c) => Number(c.score).toFixed(3) },
        { label: "subtask", cell: (c) => (c.subtask_index === null || c.subtask_index === undefined ? "" : String(c.subtask_index)) },
        { label: "right", cell: (c) => (known ? (right.has(c.skill_id) ? "right" : "") : "unknown") },
        { label: "picked", cell: (c) => record.picks.filter((p) => p.skill_id === c.skill_id).map((p) => p.kind).join(", ") },
      ], candidates, { cls: "candidates" }) : h("p", { class: "muted" }, "no candidates shown"),
      h("p", null, "picks in order: ", pickList(run, record.picks.map((p) => ({ ...p, right: known ? right.has(p.skill_id) : null })))),
      known ? null : h("p", { class: "muted" }, "The task's right skills are not known (report --labels can give them)."));
  }

  function trajectoryView(run, payload, opts = {}) {
    const t = payload.trajectory;
    const r = payload.record;
    const head = [h(opts.compact ? "h2" : "h1", null, `#${no(payload.position)} ${payload.task_id}`)];
    head.push(h("div", { class: "instruction" }, h("span", { class: "label" }, "instruction"), pre(t.instruction)));
    if (r) {
      head.push(h("p", { class: "result" }, outcomeBadge({ finished: true, success: r.success }),
        ` reward ${num(r.reward, 3)} · exit ${r.exit_status} · ${r.steps} steps · ${r.subtasks} subtasks · ${secs(r.latency_s)} · ` +
        `${num(r.prompt_tokens)}+${num(r.completion_tokens)} tokens in ${r.model_calls} calls · peak context ${num(r.peak_context)}`));
    } else {
      head.push(h("p", { class: "result" }, h("span", { class: "badge pending" }, t.status), t.error ? ` ${t.error}` : " not finished"));
    }
    const atif = atifHref(payload.key, payload.position);
    head.push(h("p", { class: "muted atif" }, atif ? h("a", { href: atif, download: "" }, "trajectory as ATIF")
      : h("span", { title: "not inside a single-file export: view --export or export --format atif writes it" },
        "trajectory as ATIF"), " (Harbor's trajectory format)"));
    const checks = (t.score && t.score.checks) || [];
    if (checks.length) {
      head.push(h("ul", { class: "checks" }, checks.map((c) => h("li", { class: c.passed ? "ok" : "fail" },
        c.passed ? "✓ " : "✗ ", String(c.requirement || ""), c.detail ? h("span", { class: "muted" }, ": " + c.detail) : null))));
    }
    if (!payload.prompts_recorded && t.calls.length) {
      head.push(h("p", { class: "muted" }, "This run was logged before prompts were kept: calls show their accounting only."));
    }
    const steps = t.steps.map((step, i) => stepView(run, payload, step, i));
    const calls = t.calls.length ? h("section", { class: "calls" }, h("h2", null, `${t.calls.length} model calls`),
      t.calls.map((_, i) => promptDetails(payload, i))) : null;
    const contexts = !payload.prompts_recorded && (t.contexts || []).length ? h("details", null, h("summary", null, "final executor contexts"),
      t.contexts.map((ctx) => ctx.map((m) => h("div", { class: "message" }, h("div", { class: "role" }, String(m.role)), foldText(m.content, 3000))))) : null;
    return h("div", { class: "trajectory", "data-task": payload.task_id }, head, selectionView(run, r),
      t.coordination ? coordinationView(t.coordination) : null, h("section", { class: "steps" }, steps), calls, contexts);
  }

  async function taskPage(key, position) {
    if (!Number.isInteger(position) || position < 0) throw new Error("no such task number");
    const [run, payload] = await Promise.all([load("run", key), load("task", key, position)]);
    setCrumbs(link(route.runs(), "runs"), link(route.run(run.key), run.label), `task #${no(position)}`);
    const positions = run.tasks.map((t) => t.position).sort((a, b) => a - b);
    const at = positions.indexOf(Number(position));
    const nav = h("p", { class: "pager" },
      at > 0 ? link(route.task(key, positions[at - 1]), "← previous task") : null, " ",
      at >= 0 && at < positions.length - 1 ? link(route.task(key, positions[at + 1]), "next task →") : null);
    add(clear(main), [nav, trajectoryView(run, payload)]);
  }

  // ------------------------------------------------------------------------------------------- compare
  async function comparePage(a, b, taskId) {
    const [ra, rb] = await Promise.all([load("run", a), load("run", b)]);
    setCrumbs(link(route.runs(), "runs"), link(route.compare(a, b), `compare ${ra.label} with ${rb.label}`),
      taskId === undefined ? "" : taskId);
    const byId = (run) => new Map(run.tasks.map((t) => [t.task_id, t]));
    const ma = byId(ra), mb = byId(rb);
    const ids = [...ma.keys()].filter((id) => mb.has(id));
    const heads = h("div", { class: "pair heads" }, [ra, rb].map((run) => h("div", null, h("h2", null, link(route.run(run.key), run.label)),
      h("p", { class: "lede" }, `${run.condition} · ${run.model} · success ${pct(run.success)} [${pct(run.ci[0])}, ${pct(run.ci[1])}]`))));
    if (taskId !== undefined) {
      const ta = ma.get(taskId), tb = mb.get(taskId);
      if (!ta || !tb) {
        add(clear(main), [heads, h("p", { class: "error" }, `Task ${taskId} is not in both runs.`)]);
        return;
      }
      const [pa, pb] = await Promise.all([load("task", a, ta.position), load("task", b, tb.position)]);
      const at = ids.indexOf(taskId);
      add(clear(main), [heads, h("p", { class: "pager" }, link(route.compare(a, b), "← outcome table"),
        at > 0 ? [" · ", link(route.compare(a, b, ids[at - 1]), "previous task")] : null,
        at < ids.length - 1 ? [" · ", link(route.compare(a, b, ids[at + 1]), "next task")] : null),
      h("div", { class: "pair" }, h("div", { class: "side", "data-run": a }, trajectoryView(ra, pa, { compact: true })),
        h("div", { class: "side", "data-run": b }, trajectoryView(rb, pb, { compact: true })))]);
      return;
    }
    const rows = ids.map((id) => ({ id, a: ma.get(id), b: mb.get(id) }));
    const solved = (t) => t.finished && t.success;
    const counts = { both: 0, a: 0, b: 0, neither: 0 };
    rows.forEach((r) => { counts[solved(r.a) && solved(r.b) ? "both" : solved(r.a) ? "a" : solved(r.b) ? "b" : "neither"] += 1; });
    const side = (pick) => [
      { label: "outcome", value: (r) => (pick(r).finished ? (pick(r).success ? 1 : 0) : -1), cell: (r) => outcomeBadge(pick(r)) },
      { label: "reward", num: true, value: (r) => pick(r).reward, cell: (r) => (pick(r).finished ? num(pick(r).reward, 2) : "") },
      { label: "steps", num: true, value: (r) => pick(r).steps, cell: (r) => (pick(r).finished ? String(pick(r).steps) : "") },
      { label: "tokens", num: true, value: (r) => pick(r).tokens, cell: (r) => (pick(r).finished ? num(pick(r).tokens) : "") },
    ];
    const table = dataTable([
      { label: "task", value: (r) => r.id, cell: (r) => link(route.compare(a, b, r.id), r.id) },
      ...side((r) => r.a).map((c) => ({ ...c, label: "A " + c.label })),
      ...side((r) => r.b).map((c) => ({ ...c, label: "B " + c.label })),
      { label: "", value: (r) => (solved(r.a) === solved(r.b) ? "" : solved(r.a) ? "A only" : "B only"),
        cell: (r) => (solved(r.a) === solved(r.b) ? "" : solved(r.a) ? "A only" : "B only") },
    ], rows, { cls: "compare", rowClass: (r) => (solved(r.a) === solved(r.b) ? null : "differs") });
    add(clear(main), [heads, h("p", null, `${ids.length} shared tasks: both solved ${counts.both}, only A ${counts.a}, only B ${counts.b}, neither ${counts.neither}` +
      (ma.size - ids.length || mb.size - ids.length ? ` (${ma.size - ids.length} only in A, ${mb.size - ids.length} only in B)` : "") +
      ". A is the left run, B the right; click a task to read both trajectories side by side."), table]);
  }

  // ------------------------------------------------------------------------------------------- report page
  // A folder `skilltransfer report` wrote: its figures and its tables (the CSVs, as text), the diagnostics against
  // randomised effects (utility_effects) first.
  const REPORT_TITLES = {
    utility_effects: "Does a cheap score predict a skill's effect? Diagnostics against randomised effects, and the binned correlation (Fig. 5a)",
    utility_effects_skills: "Each masked skill: diagnostics and effect on success",
    skill_effects: "Per-skill causal effects (randomised masking)",
  };
  function reportCell(text) {
    if (text === "") return h("span", { class: "muted" }, "-");
    if (/^-?\d+\.\d{4,}(e-?\d+)?$/.test(text)) return Number(text).toFixed(3);
    return text.length > 80 ? h("span", { title: text }, text.slice(0, 80) + "…") : text;
  }

  async function reportPage(key) {
    const [report, index] = await Promise.all([load("report", key), load("index")]);
    setCrumbs(link(route.runs(), "runs"), `report ${report.label}`);
    const first = (f) => (f.label.endsWith("/utility_effects.png") ? 0 : 1);
    const figures = index.figures.filter((f) => f.label.startsWith(report.figures_prefix))
      .sort((a, b) => first(a) - first(b));
    const settings = Object.entries(report.settings || {}).map(([k, v]) => `${k}=${v}`).join(", ");
    const parts = [h("h1", null, report.label),
      h("p", { class: "lede" }, `${report.runs.length} runs · ${report.tables.length} tables` + (settings ? ` · ${settings}` : ""))];
    if (figures.length) {
      parts.push(h("div", { class: "figures" }, figures.map((f) =>
        h("figure", null, h("img", { src: figureSrc(f.key), alt: f.label, loading: "lazy" }), h("figcaption", null, f.label)))));
    }
    for (const table of report.tables) {
      const columns = table.columns.map((name, i) => ({ label: name, value: (row) => {
        const n = Number(row[i]);
        return row[i] !== "" && !Number.isNaN(n) ? n : row[i];
      }, cell: (row) => reportCell(row[i]), num: table.rows.some((row) => row[i] !== "" && !Number.isNaN(Number(row[i]))) }));
      parts.push(h("section", { class: "report-table", "data-table": table.name },
        h("h2", null, REPORT_TITLES[table.name] || table.name),
        h("p", { class: "muted" }, `${table.name}.csv: ${table.total} rows` + (table.total > table.rows.length ? ` (first ${table.rows.length} shown)` : "")),
        dataTable(columns, table.rows, { cls: "report" })));
    }
    add(clear(main), parts);
  }

  // ------------------------------------------------------------------------------------------- router
  async function render() {
    const parts = location.hash.replace(/^#\/?/, "").split("/").filter((p) => p !== "").map((p) => {
      try { return decodeURIComponent(p); } catch (e) { return p; }
    });
    const token = ++state.renders;
    statusLine.textContent = "loading…";
    const start = performance.now();
    try {
      if (!parts.length) await runsPage();
      else if (parts[0] === "run" && parts.length === 2) await runPage(parts[1], "tasks");
      else if (parts[0] === "run" && parts[2] === "task" && parts.length === 4) await taskPage(parts[1], Number(parts[3]) - 1);
      else if (parts[0] === "run" && parts[2] === "skill" && parts.length === 4) await runPage(parts[1], "skill", parts[3]);
      else if (parts[0] === "run" && parts.length === 3) await runPage(parts[1], parts[2]);
      else if (parts[0] === "compare" && (parts.length === 3 || parts.length === 4)) await comparePage(parts[1], parts[2], parts[3]);
      else if (parts[0] === "report" && parts.length === 2) await reportPage(parts[1]);
      else add(clear(main), [h("p", { class: "error" }, "No such page."), link(route.runs(), "all runs")]);
      if (token === state.renders) statusLine.textContent = "";
    } catch (err) {
      if (token !== state.renders) return;
      add(clear(main), [h("p", { class: "error" }, "Could not load: " + (err && err.message ? err.message : String(err))), link(route.runs(), "all runs")]);
      statusLine.textContent = "";
    }
    state.timings.page = performance.now() - start;
    document.body.dataset.rendered = String(token);
    if (location.hash.includes("/task/") || location.hash.startsWith("#/compare/")) window.scrollTo(0, 0);
  }

  window.addEventListener("hashchange", render);
  render();
})();
