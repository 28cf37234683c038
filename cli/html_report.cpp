#include "cli/html_report.h"

#include <algorithm>

#include "cli/plan_json.h"
#include "planner/memory_breakdown.h"
#include "planner/model_stats.h"
#include "planner/search.h"

namespace zeroplan::cli {
namespace {

using nlohmann::json;

json buffers_json(const planner::MemoryBreakdown& m) {
  json out = json::array();
  for (int i = 0; i < m.num_gpu; ++i) {
    const auto& b = m.gpu[static_cast<size_t>(i)];
    json phases = json::array();
    for (int p = 0; p < planner::kNumPhases; ++p) phases.push_back((b.phases & (1 << p)) != 0);
    out.push_back({{"name", b.name},
                   {"category", std::string(planner::category_name(b.category))},
                   {"bytes", b.bytes},
                   {"phases", phases},  // live in forward, backward, step (after finalize())
                   {"after_step", b.after_step},
                   {"note", b.note},
                   {"ds_name", b.ds_name ? json(b.ds_name) : json(nullptr)}});
  }
  return out;
}

// The same configuration at other micro-batch sizes (grad-accum, checkpointing, offload and buckets
// unchanged), evaluated by the planner exactly as the search evaluates a candidate.
json sweep_json(const planner::Workload& w, const planner::Plan& p, double margin) {
  const planner::ModelStats stats = planner::compute_model_stats(w);
  // Up to twice the plan's micro-batch (at least 8 points), capped so the report stays small.
  const int64_t top = std::min<int64_t>(64, std::max<int64_t>(8, 2 * p.zero.micro_batch));
  json out = json::array();
  for (int64_t mb = 1; mb <= top; ++mb) {
    planner::ZeroConfig z = p.zero;
    z.micro_batch = mb;
    const planner::Plan q = planner::evaluate_plan(w, stats, z, margin);
    out.push_back({{"micro_batch", mb},
                   {"fits", q.fits},
                   {"peak", q.memory.peak},
                   {"tokens_per_s", q.tokens_per_s},
                   {"step_s", q.time.step_s}});
  }
  return out;
}

// JSON inside <script>: "</" must not end the element early (HTML spec, "script data" state).
std::string script_safe(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' && i + 1 < s.size() && s[i + 1] == '/') {
      out += "<\\/";
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The page: CSS and a small renderer that draws SVG from the embedded data. No library, no network.
constexpr const char* kHead = R"zphtml(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>)zphtml";

constexpr const char* kStyle = R"zphtml(</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1100px;color:#1d2330;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde;padding-bottom:4px}
.sub{color:#5a6275}.rec{background:#eef6ee;border:1px solid #9c9;border-radius:6px;padding:10px 14px;margin:12px 0}
.bad{background:#fbeeee;border-color:#d99}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{padding:4px 8px;border-bottom:1px solid #e4e6ee;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f4f5f9}
svg{display:block;max-width:100%;height:auto}svg text{font:12px system-ui,sans-serif;fill:#1d2330}
.legend span{display:inline-block;margin-right:14px;font-size:12px}.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px;border-radius:2px}
pre{background:#f6f7fa;border:1px solid #e0e3ea;border-radius:6px;padding:10px;overflow:auto;max-height:420px;font-size:12px}
button{font:13px system-ui,sans-serif;padding:4px 12px;border:1px solid #99a;border-radius:5px;background:#fff;cursor:pointer}
#tip{position:fixed;pointer-events:none;background:#1d2330;color:#fff;padding:6px 9px;border-radius:5px;font-size:12px;max-width:420px;display:none;white-space:pre-line;z-index:9}
ul.reasons li{margin:3px 0}.charts{display:grid;grid-template-columns:1fr 1fr;gap:18px}
</style></head><body>
<div id="tip"></div>
<div id="app"></div>
<script type="application/json" id="zeroplan-data">)zphtml";

constexpr const char* kScript = R"zphtml(</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("zeroplan-data").textContent);
const CAT = {parameters:"#4c72b0",gradients:"#dd8452",optimizer_states:"#55a868",activations:"#c44e52",buffers:"#8172b3",overhead:"#937860"};
const PH = ["forward","backward","step"];
const SC = ["#4c72b0","#dd8452","#55a868","#c44e52","#8172b3","#937860"];
const gb = b => (b/1e9).toFixed(1) + " GB";
const esc = s => String(s).replace(/[&<>"]/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c]));
const app = document.getElementById("app"), tip = document.getElementById("tip");
function el(tag, attrs, html) { const e = document.createElement(tag); for (const k in attrs||{}) e.setAttribute(k, attrs[k]); if (html !== undefined) e.innerHTML = html; app.appendChild(e); return e; }
function hover(svg) {
  svg.addEventListener("mousemove", ev => { const t = ev.target.getAttribute && ev.target.getAttribute("data-tip");
    if (!t) { tip.style.display = "none"; return; } tip.textContent = t; tip.style.display = "block";
    tip.style.left = (ev.clientX + 14) + "px"; tip.style.top = (ev.clientY + 14) + "px"; });
  svg.addEventListener("mouseleave", () => { tip.style.display = "none"; });
}
function svgEl(w, h, body, id) { return `<svg id="${id}" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" xmlns="http://www.w3.org/2000/svg">${body}</svg>`; }
function nice(max) { if (max <= 0) return 1; const p = Math.pow(10, Math.floor(Math.log10(max))); for (const m of [1,2,2.5,5,10]) if (m*p >= max) return m*p; return 10*p; }
function axes(x0, y0, w, h, ymax, fmt, n) { let s = ""; for (let i = 0; i <= n; i++) { const v = ymax*i/n, y = y0 + h - h*i/n;
  s += `<line x1="${x0}" x2="${x0+w}" y1="${y}" y2="${y}" stroke="#e4e6ee"/><text x="${x0-6}" y="${y+4}" text-anchor="end">${fmt(v)}</text>`; } return s; }

// Header and the recommendation.
const A = D.answer, P = D.plans;
el("h1", {}, esc(D.title));
el("div", {class:"sub"}, esc(`${A.model ? A.model.name : ""} · ${A.cluster ? A.cluster.nodes*A.cluster.gpus_per_node + "× " + A.cluster.gpu : ""} · zeroplan ${A.zeroplan_version} · ${D.kind}`));
const rec = P.find(p => p.recommended);
if (D.kind === "plan") el("div", {class: rec ? "rec" : "rec bad", id:"verdict"}, rec ? `<b>Recommended: ${esc(rec.label)}</b>, micro-batch ${rec.micro_batch} × grad-accum ${rec.grad_accum}, checkpointing ${esc(rec.checkpointing)}, offload ${esc(rec.offload)}: peak <b>${gb(rec.peak)}</b> of ${gb(rec.usable)} usable, step ${rec.step_s.toFixed(2)} s, <b>${Math.round(rec.tokens_per_s)} tokens/s</b>` : `<b>Nothing fits.</b> ${esc(A.reason || "")}`);
else if (D.kind === "diagnose") el("div", {class: A.causes.length ? "rec bad" : "rec", id:"verdict"}, `<b>${A.causes.length} cause(s) found</b>` + (A.predicted ? ` — predicted step ${A.predicted.step_ms.toFixed(0)} ms` + (A.predicted_after_fix_ms !== null ? `, ${A.predicted_after_fix_ms.toFixed(0)} ms with every fix` : "") : " (pass --model and --gpus for the predicted step)"));
else el("div", {class: A.exit_code === 0 ? "rec" : "rec bad", id:"verdict"}, `<b>Verdict: ${esc(A.verdict)}</b>` + (P[0] ? ` — peak ${gb(P[0].peak)} of ${gb(P[0].usable)} usable, step ${P[0].step_s.toFixed(2)} s, ${Math.round(P[0].tokens_per_s)} tokens/s` : ""));

// 1. Memory at the peak, per plan, stacked by buffer (a refused config has no prediction: no charts).
if (P.length) {
el("h2", {}, "GPU memory at the peak, by buffer (hover for its source and lifetime)");
el("div", {class:"legend"}, Object.keys(CAT).map(c => `<span><i style="background:${CAT[c]}"></i>${c}</span>`).join(""));
{
  const W = 1060, L = 150, R = 90, rowH = 30, H = 30 + rowH*P.length;
  const max = nice(Math.max(...P.map(p => Math.max(p.peak, p.usable))) * 1.02), sx = v => L + (W-L-R)*v/max;
  let s = "";
  P.forEach((p, i) => { const y = 8 + i*rowH; let x = 0;
    s += `<text x="${L-8}" y="${y+17}" text-anchor="end" font-weight="${p.recommended?700:400}">${esc(p.label)}</text>`;
    const live = p.buffers.filter(b => b.phases[p.peak_phase]).sort((a,b) => Object.keys(CAT).indexOf(a.category) - Object.keys(CAT).indexOf(b.category));
    for (const b of live) { const w = sx(x + b.bytes) - sx(x);
      const life = PH.filter((_, k) => b.phases[k]).join(", ") + (b.after_step ? "; stays after the step" : "; freed at the step's end");
      s += `<rect class="buf" x="${sx(x)}" y="${y}" width="${Math.max(w,0)}" height="${rowH-8}" fill="${CAT[b.category]}" stroke="#fff" stroke-width="0.5" data-tip="${esc(b.name + " — " + gb(b.bytes) + " (" + b.category + ")\nlive: " + life + (b.note ? "\nsource: " + b.note : "") + (b.ds_name ? "\nDeepSpeed: " + b.ds_name : ""))}"/>`;
      x += b.bytes; }
    s += `<line x1="${sx(p.usable)}" x2="${sx(p.usable)}" y1="${y-3}" y2="${y+rowH-5}" stroke="#000" stroke-width="2"/>`;
    s += `<text x="${sx(Math.max(p.peak,p.usable))+6}" y="${y+17}">${gb(p.peak)}${p.fits?"":" ✗"}</text>`; });
  s += `<text x="${L}" y="${H-4}" fill="#5a6275">black tick: usable memory per GPU (capacity less the margin); peak phase shown per plan</text>`;
  hover(el("div", {}, svgEl(W, H, s, "membars")).firstChild);
}

// 2. Memory over the step.
el("h2", {}, "Memory over one step (forward → backward → optimizer step), peak marked");
{
  const W = 1060, H = 260, L = 70, T = 14, B = 30, pw = W - L - 260, ph = H - T - B;
  const max = nice(Math.max(...P.map(p => Math.max(...p.phase_total, p.usable))) * 1.05), sy = v => T + ph - ph*v/max;
  let s = axes(L, T, pw, ph, max, v => (v/1e9).toFixed(0) + " GB", 5);
  PH.forEach((n, k) => { s += `<text x="${L + pw*(k+0.5)/3}" y="${H-8}" text-anchor="middle">${n}</text>`; });
  P.forEach((p, i) => { const c = SC[i % SC.length]; let d = "";
    p.phase_total.forEach((v, k) => { d += `${k ? "L" : "M"}${L + pw*k/3},${sy(v)} L${L + pw*(k+1)/3},${sy(v)} `; });
    s += `<path d="${d}" fill="none" stroke="${c}" stroke-width="${p.recommended?3:1.6}"/>`;
    const k = p.peak_phase, xm = L + pw*(k+0.5)/3;
    s += `<circle class="peak" cx="${xm}" cy="${sy(p.phase_total[k])}" r="5" fill="${c}" data-tip="${esc(p.label + ": peak " + gb(p.phase_total[k]) + " in the " + PH[k] + " phase")}"/>`;
    s += `<text x="${L+pw+10}" y="${T+14+i*18}" fill="${c}">${esc(p.label)}: peak ${gb(p.peak)} (${PH[k]})</text>`;
    s += `<line x1="${L}" x2="${L+pw}" y1="${sy(p.usable)}" y2="${sy(p.usable)}" stroke="${c}" stroke-dasharray="4 4" stroke-width="1"/>`; });
  s += `<text x="${L+pw+10}" y="${T+14+P.length*18+6}" fill="#5a6275">dashed: usable</text>`;
  hover(el("div", {}, svgEl(W, H, s, "overstep")).firstChild);
}

// 3. Tokens/s and peak against micro-batch.
el("h2", {}, "Tokens/s and peak memory against micro-batch (same configuration otherwise; hollow: does not fit)");
{
  const box = el("div", {class:"charts"});
  const chart = (id, title, key, fmt, withUsable) => {
    const W = 520, H = 260, L = 62, T = 22, B = 34, pw = W - L - 12, ph = H - T - B;
    const xmax = Math.max(...P.map(p => p.sweep.length ? p.sweep[p.sweep.length-1].micro_batch : 1));
    const ymax = nice(Math.max(...P.flatMap(p => p.sweep.map(q => q[key])), withUsable ? Math.max(...P.map(p => p.usable)) : 0) * 1.05);
    const sx = v => L + pw*(v-1)/Math.max(1, xmax-1), sy = v => T + ph - ph*v/ymax;
    let s = `<text x="${L}" y="14" font-weight="600">${title}</text>` + axes(L, T, pw, ph, ymax, fmt, 4);
    for (let m = 1; m <= xmax; m += Math.max(1, Math.ceil(xmax/10))) s += `<text x="${sx(m)}" y="${H-14}" text-anchor="middle">${m}</text>`;
    s += `<text x="${L+pw/2}" y="${H-1}" text-anchor="middle" fill="#5a6275">micro-batch</text>`;
    P.forEach((p, i) => { const c = SC[i % SC.length];
      s += `<polyline fill="none" stroke="${c}" stroke-width="${p.recommended?2.5:1.4}" points="${p.sweep.map(q => sx(q.micro_batch)+","+sy(q[key])).join(" ")}"/>`;
      for (const q of p.sweep) s += `<circle class="pt" cx="${sx(q.micro_batch)}" cy="${sy(q[key])}" r="${q.micro_batch===p.micro_batch?5:3}" fill="${q.fits?c:"#fff"}" stroke="${c}" data-tip="${esc(p.label + ", micro-batch " + q.micro_batch + ": " + fmt(q[key]) + (q.fits ? "" : " (does not fit)"))}"/>`;
      if (withUsable) s += `<line x1="${L}" x2="${L+pw}" y1="${sy(p.usable)}" y2="${sy(p.usable)}" stroke="${c}" stroke-dasharray="4 4"/>`; });
    const d = document.createElement("div"); d.innerHTML = svgEl(W, H, s, id); box.appendChild(d); hover(d.firstChild);
  };
  chart("tps", "tokens/s", "tokens_per_s", v => Math.round(v).toString(), false);
  chart("peakmb", "peak GB per GPU", "peak", v => (v/1e9).toFixed(0) + " GB", true);
  el("div", {class:"legend"}, P.map((p, i) => `<span><i style="background:${SC[i % SC.length]}"></i>${esc(p.label)}</span>`).join(""));
}
}

// 4. Collectives of the recommended (or first) plan.
const main = rec || P[0];
if (main) {
  el("h2", {}, `Collectives per step: ${esc(main.label)} (bytes/rank: nccl-tests bus bytes each GPU sends)`);
  el("table", {id:"collectives"}, "<tr><th>collective</th><th>kind</th><th>calls</th><th>max message</th><th>bytes/rank</th><th>time</th><th>exposed</th></tr>" +
    main.collectives.map(c => `<tr><td>${esc(c.name)}</td><td>${esc(c.kind)}</td><td>${c.calls_per_step}</td><td>${(c.message_bytes/1e6).toFixed(1)} MB</td><td>${(c.bytes_per_rank/1e9).toFixed(2)} GB</td><td>${(c.time_s*1e3).toFixed(1)} ms</td><td>${(c.exposed_s*1e3).toFixed(1)} ms</td></tr>`).join(""));
}

// 5. Reasons (plan) or issues (check).
el("h2", {}, D.kind === "plan" ? "Why" : D.kind === "check" ? "Issues and reasons" : "Causes, observations, what the log lacked");
el("ul", {class:"reasons", id:"reasons"}, D.reasons.map(r => `<li>${esc(r)}</li>`).join("") || "<li>none</li>");

// 6. The DeepSpeed config, with a copy button.
const shownConfig = D.kind === "diagnose" ? A.fixed_config : (main ? main.deepspeed_config : null);
if (shownConfig) {
  el("h2", {}, D.kind === "diagnose" ? "ds_config.json with every fix applied" : `ds_config.json of ${esc(main.label)}`);
  const text = JSON.stringify(shownConfig, null, 2);
  const b = el("button", {id:"copy"}, "Copy");
  const pre = el("pre", {id:"config"}); pre.textContent = text;
  b.addEventListener("click", () => {
    const done = () => { b.textContent = "Copied"; setTimeout(() => { b.textContent = "Copy"; }, 1500); };
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, () => fallback());
    else fallback();
    function fallback() { const r = document.createRange(); r.selectNodeContents(pre); const sel = getSelection(); sel.removeAllRanges(); sel.addRange(r); document.execCommand("copy"); done(); }
  });
}
el("p", {class:"sub"}, "Generated by zeroplan; GB = 1e9 bytes. Works offline: this file loads nothing.");
document.body.setAttribute("data-rendered", "1");
</script>
</body></html>
)zphtml";

}  // namespace

json report_data(const std::string& kind, const std::string& title, const json& answer,
                 const std::vector<std::string>& reasons, const std::vector<ReportPlan>& plans,
                 double memory_margin) {
  json out = {
      {"kind", kind}, {"title", title}, {"answer", answer}, {"reasons", reasons}, {"plans", json::array()}};
  for (const auto& rp : plans) {
    const planner::Plan& p = *rp.plan;
    const auto& m = p.memory;
    // Collectives and the config exactly as the JSON contract gives them (cli/plan_json.cpp).
    const json pj = plan_to_json(*rp.workload, p);
    std::string offload = "none";
    if (p.zero.offload_optimizer != planner::Offload::None || p.zero.offload_param != planner::Offload::None)
      offload = "optimizer " + std::string(planner::to_string(p.zero.offload_optimizer)) + ", params " +
                std::string(planner::to_string(p.zero.offload_param));
    out["plans"].push_back({{"label", rp.label},
                            {"recommended", rp.recommended},
                            {"stage", p.zero.stage},
                            {"fits", p.fits},
                            {"micro_batch", p.zero.micro_batch},
                            {"grad_accum", p.zero.grad_accum},
                            {"checkpointing", planner::to_string(p.zero.checkpointing)},
                            {"offload", offload},
                            {"peak", m.peak},
                            {"peak_phase", m.peak_phase},
                            {"usable", p.capacity_bytes},
                            {"phase_total", m.phase_total},
                            {"step_s", p.time.step_s},
                            {"tokens_per_s", p.tokens_per_s},
                            {"buffers", buffers_json(m)},
                            {"collectives", pj["communication"]["collectives"]},
                            {"sweep", sweep_json(*rp.workload, p, memory_margin)},
                            {"deepspeed_config", pj["deepspeed_config"]}});
  }
  return out;
}

std::string render_html_report(const json& data) {
  return std::string(kHead) + html_escape(data.value("title", std::string("zeroplan"))) + kStyle +
         script_safe(data.dump(-1, ' ', false, json::error_handler_t::replace)) + kScript;
}

}  // namespace zeroplan::cli
