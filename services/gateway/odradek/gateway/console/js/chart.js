// The overview's throughput chart: rates computed from the gateway's counter samples
// (/v3/clusters/<id>/throughput), drawn as two SVG polylines (bytes in, bytes out).

import { fmt } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const POINTS = 60;

function svg(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

export class ThroughputChart {
  constructor(container) {
    this.rates = [];      // {inBps, outBps, msgs}
    this.last = null;     // the previous sample
    this.svg = svg("svg", { viewBox: "0 0 600 180", preserveAspectRatio: "none", role: "img" });
    this.title = svg("title", {});
    this.svg.append(this.title);
    this.scale = document.createElement("p");   // text outside the stretched SVG keeps its shape
    this.scale.className = "muted";
    this.legend = document.createElement("p");
    this.legend.id = "throughput-legend";
    this.legend.className = "muted";
    container.append(this.scale, this.svg, this.legend);
  }

  /** Adds a sample; a counter that went down (a broker restarted) skips that interval. */
  add(sample) {
    const prev = this.last;
    this.last = sample;
    if (!prev || sample.sampled_at_ms <= prev.sampled_at_ms) return this.draw();
    const seconds = (sample.sampled_at_ms - prev.sampled_at_ms) / 1000;
    const rate = (key) => (sample[key] >= prev[key] ? (sample[key] - prev[key]) / seconds : null);
    const point = { inBps: rate("bytes_in_total"), outBps: rate("bytes_out_total"), msgs: rate("messages_in_total") };
    if (point.inBps !== null && point.outBps !== null) this.rates = [...this.rates, point].slice(-POINTS);
    this.draw();
  }

  draw() {
    for (const old of this.svg.querySelectorAll("polyline, line")) old.remove();
    const max = Math.max(1024, ...this.rates.flatMap((r) => [r.inBps, r.outBps]));
    const x = (i) => (600 * i) / (POINTS - 1);
    const y = (v) => 170 - (160 * v) / max;
    const line = (key, cls) => svg("polyline", {
      class: cls, points: this.rates.map((r, i) => `${x(i + POINTS - this.rates.length)},${y(r[key])}`).join(" ") });
    this.svg.append(svg("line", { class: "axis", x1: 0, y1: 170, x2: 600, y2: 170 }),
      line("inBps", "in"), line("outBps", "out"));
    this.scale.textContent = `Top of the chart: ${fmt.bytes(max)}/s; the last ${POINTS} samples.`;
    const now = this.rates[this.rates.length - 1];
    const text = now
      ? `In ${fmt.bytes(now.inBps)}/s (${fmt.int(Math.round(now.msgs ?? 0))} records/s), out ${fmt.bytes(now.outBps)}/s`
      : "Collecting samples…";
    this.title.textContent = `Throughput: ${text}`;
    this.legend.textContent = `Blue: bytes in; green: bytes out. ${text}`;
  }
}
