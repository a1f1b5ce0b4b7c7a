// timeline.js draws a hiatus history on a canvas: one row a worker slot,
// each critical section a bar on the Redis clock with its lease window,
// faults as shaded bands, violations in colours of their own. It reads
// the columns report/timeline_page.go writes. One canvas, not one DOM node
// an op, and only what is in view is drawn, coalescing sections narrower
// than a pixel, so that 250,000 sections stay usable.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("data").textContent);
  for (const k of ["faults", "faultAt", "faultRow", "marks", "markAt", "markRow", "rows"]) D[k] = D[k] || [];
  // The lock server's record: a row a node, under the workers' rows.
  const SV = D.server || {};
  for (const k of ["nodes", "clients", "ends", "node", "t0", "t1", "dl", "c", "w", "by", "how", "tok", "gapAt", "gapNode"]) SV[k] = SV[k] || [];
  const NW = D.rows.length;
  const STALE = 1, LOST = 2, OVERLAP = 4, LATE = 8, OVERRAN = 16;
  const COLOR = {
    bar: "#4a78b5", overlap: "#e0a100", stale: "#d62020", lost: "#8e24aa",
    lease: "#9fd0f0", overran: "#d62020", fault: "rgba(120,60,200,0.16)", faultEdge: "rgba(120,60,200,0.6)",
    kill: "rgba(40,40,40,0.18)", read: "#1b7f3b", write: "#222", grid: "#eee", axis: "#555", sel: "#000",
    gap: "rgba(90,90,90,0.25)", deleted: "#222", expired: "#d62020", overwritten: "#e0a100",
  };
  // A holder's colour on the server's rows: its worker slot's.
  const HOLDER = ["#4a78b5", "#2e9e6b", "#c77800", "#8e24aa", "#d64b8a", "#5c6bc0", "#00897b", "#795548"];
  function holderColour(k) { return SV.w[k] >= 0 ? HOLDER[SV.w[k] % HOLDER.length] : "#888"; }
  // Rows shrink when there are many, so that the canvas stays within what a
  // browser will paint (65,535 pixels, at twice the density).
  const NROWS = Math.max(1, D.rows.length + SV.nodes.length);
  const ROW = Math.max(10, Math.min(34, Math.floor(30000 / NROWS))), LABEL = 150, AXIS = 26;
  const BAR_Y = Math.round(ROW * 0.2), BAR_H = Math.max(4, Math.round(ROW * 0.42)), LEASE_Y = Math.round(ROW * 0.72), LEASE_H = Math.max(1, Math.round(ROW * 0.12));

  // Decode the columns into absolute times (µs from the first op).
  const S = D.s, n = S.row.length;
  const t0 = new Float64Array(n), t1 = new Float64Array(n), acq = new Float64Array(n);
  for (let i = 0, t = 0, a = 0; i < n; i++) {
    t += S.t0[i]; a += S.acq[i];
    t0[i] = t; t1[i] = t + S.d[i]; acq[i] = a;
  }
  const nrows = NROWS;
  // Per row: its sections in order of start, and the running maximum of
  // their ends, so that the first one in view is a binary search away.
  const rowSecs = Array.from({ length: nrows }, () => []);
  for (let i = 0; i < n; i++) rowSecs[S.row[i]].push(i);
  const rowMaxEnd = rowSecs.map(list => {
    const m = new Float64Array(list.length);
    let hi = -Infinity;
    list.forEach((i, k) => { hi = Math.max(hi, t1[i]); m[k] = hi; });
    return m;
  });
  // The violations "first violation" steps through: stale writes and lost
  // updates, else overlaps, else late writes.
  let violations = [];
  for (const f of [STALE | LOST, OVERLAP, LATE]) {
    for (let i = 0; i < n; i++) if (S.fl[i] & f) violations.push(i);
    if (violations.length) break;
  }

  const canvas = document.getElementById("canvas"), ctx = canvas.getContext("2d");
  const tip = document.getElementById("tip"), status = document.getElementById("status");
  const span0 = t0[0], span1 = Math.max(D.end, t1[n - 1]);
  let v0 = span0, v1 = span1, width = 0, selected = -1;

  function x(t) { return LABEL + (t - v0) * (width - LABEL) / (v1 - v0); }
  function tAt(px) { return v0 + (px - LABEL) * (v1 - v0) / (width - LABEL); }
  // tick labels a time at the axis's step: no more digits than it needs.
  function tick(us, step) {
    if (step >= 1e6 || Math.abs(us) >= 1e7) return (us / 1e6).toFixed(step >= 1e6 ? 0 : step >= 1e5 ? 1 : step >= 1e4 ? 2 : 3) + " s";
    if (step >= 1e3) return (us / 1e3).toFixed(0) + " ms";
    return (us / 1e3).toFixed(step >= 100 ? 1 : step >= 10 ? 2 : 3) + " ms";
  }
  function fmt(us) {
    const a = Math.abs(us);
    if (a >= 1e6) return (us / 1e6).toFixed(a >= 1e8 ? 1 : 3) + " s";
    if (a >= 1e3) return (us / 1e3).toFixed(a >= 1e5 ? 0 : 1) + " ms";
    return us.toFixed(0) + " µs";
  }

  function resize() {
    const dpr = window.devicePixelRatio || 1;
    width = canvas.clientWidth || 1000;
    const h = AXIS + nrows * ROW + 4;
    canvas.style.height = h + "px";
    canvas.width = Math.round(width * dpr); canvas.height = Math.round(h * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    draw();
  }

  // first is the index, in a row's list, of the first section that may
  // reach into [from, …).
  function first(r, from) {
    const m = rowMaxEnd[r];
    let lo = 0, hi = m.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (m[mid] < from) lo = mid + 1; else hi = mid; }
    return lo;
  }

  function axis() {
    // The smallest step of 1, 2 or 5 times a power of ten that leaves 90
    // pixels between ticks.
    const want = 90 * (v1 - v0) / (width - LABEL), e = Math.pow(10, Math.floor(Math.log10(Math.max(want, 1))));
    const step = [1, 2, 5, 10].map(m => m * e).find(s => s >= want) || 10 * e;
    ctx.fillStyle = "#fafafa"; ctx.fillRect(LABEL, 0, width - LABEL, AXIS);
    ctx.font = "11px sans-serif"; ctx.textBaseline = "middle"; ctx.fillStyle = COLOR.axis;
    for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      const px = x(t);
      ctx.fillStyle = COLOR.grid; ctx.fillRect(px, AXIS, 1, nrows * ROW);
      ctx.fillStyle = COLOR.axis; ctx.fillRect(px, AXIS - 6, 1, 6);
      ctx.fillText(tick(t, step), px + 3, AXIS / 2);
    }
  }

  function faults() {
    ctx.font = "11px sans-serif"; ctx.textBaseline = "top";
    D.faults.forEach((f, k) => {
      const [a, b] = D.faultAt[k];
      if (b < v0 || a > v1) return;
      const r = D.faultRow[k], xa = Math.max(LABEL, x(a)), xb = Math.max(xa + (f.failed ? 1 : 2), Math.min(width, x(b)));
      const y = r < 0 ? AXIS : AXIS + r * ROW, h = r < 0 ? nrows * ROW : ROW;
      ctx.fillStyle = f.f === "kill" ? COLOR.kill : COLOR.fault; ctx.fillRect(xa, y, xb - xa, h);
      ctx.fillStyle = COLOR.faultEdge; ctx.fillRect(xa, y, 1, h); ctx.fillRect(xb - 1, y, 1, h);
    });
  }

  // faultLabels names each fault wide enough to hold its name, at the foot
  // of its band, over what is drawn there.
  function faultLabels() {
    ctx.font = "11px sans-serif"; ctx.textBaseline = "bottom";
    D.faults.forEach((f, k) => {
      const [a, b] = D.faultAt[k];
      if (b < v0 || a > v1) return;
      const r = D.faultRow[k], xa = Math.max(LABEL, x(a)), xb = Math.max(xa + (f.failed ? 200 : 0), Math.min(width, x(b)));
      const y = (r < 0 ? AXIS + nrows * ROW : AXIS + (r + 1) * ROW) - 1;
      const label = f.kind + (f.failed ? " (failed to begin)" : " " + fmt(b - a)), w = ctx.measureText(label).width;
      if (xb - xa < w + 6) return;
      ctx.fillStyle = "rgba(255,255,255,0.85)"; ctx.fillRect(xa + 2, y - 12, w + 2, 12);
      ctx.fillStyle = COLOR.faultEdge; ctx.fillText(label, xa + 3, y);
    });
  }

  function colour(fl) {
    if (fl & STALE) return COLOR.stale;
    if (fl & LOST) return COLOR.lost;
    if (fl & OVERLAP) return COLOR.overlap;
    return COLOR.bar;
  }

  // section draws section i in row r; detail adds its lease window, its
  // read and write marks and, when there is room, their values.
  function section(i, r, detail) {
    const y = AXIS + r * ROW, xa = x(t0[i]), xb = Math.max(xa + (S.fl[i] ? 3 : 1), x(t1[i]));
    const lease = S.lease[i] * 1e3;
    if (detail && lease > 0) {
      ctx.fillStyle = COLOR.lease;
      ctx.fillRect(xa, y + LEASE_Y, Math.max(1, x(t0[i] + lease) - xa), LEASE_H);
    }
    ctx.fillStyle = colour(S.fl[i]);
    // A pixel's gap at the end of a wide bar tells one section from the next.
    ctx.fillRect(xa, y + BAR_Y, xb - xa > 4 ? xb - xa - 1 : xb - xa, BAR_H);
    if (lease > 0 && (S.fl[i] & OVERRAN)) {
      // The part held past the lease, hatched.
      const xl = x(t0[i] + lease);
      ctx.fillStyle = COLOR.overran; ctx.fillRect(xl, y + BAR_Y + BAR_H, Math.max(1, xb - xl), 3);
      ctx.fillRect(xl, y + 3, 1.5, ROW - 6);
    }
    if (i === selected) { ctx.strokeStyle = COLOR.sel; ctx.lineWidth = 2; ctx.strokeRect(xa - 1, y + BAR_Y - 1, xb - xa + 2, BAR_H + 2); }
    if (!detail || xb - xa < 8) return;
    if (S.ra[i] >= 0) { ctx.fillStyle = COLOR.read; ctx.fillRect(x(t0[i] + S.ra[i]) - 1, y + BAR_Y - 3, 2, BAR_H + 6); }
    if (S.wt[i]) {
      const xw = x(t0[i] + S.wi[i]);
      ctx.fillStyle = S.wt[i] === 1 ? COLOR.write : "#999";
      ctx.beginPath(); ctx.moveTo(xw - 4, y + 1); ctx.lineTo(xw + 4, y + 1); ctx.lineTo(xw, y + BAR_Y + 2); ctx.fill();
    }
    const words = (S.ra[i] >= 0 ? "r" + S.r[i] : "") + (S.wt[i] ? " w" + S.wv[i] + (S.wt[i] === 2 ? "✗" : S.wt[i] === 3 ? "?" : "") : "");
    ctx.font = "10px sans-serif"; ctx.textBaseline = "middle";
    if (words && xb - xa > ctx.measureText(words).width + 4) {
      ctx.fillStyle = "#fff"; ctx.fillText(words, xa + 2, y + BAR_Y + BAR_H / 2);
    }
  }

  function draw() {
    ctx.clearRect(0, 0, width, AXIS + nrows * ROW + 4);
    axis();
    faults();
    let drawn = 0;
    for (let r = 0; r < nrows; r++) {
      const flagged = []; // drawn last, over the others
      const list = rowSecs[r];
      // Lease windows, marks and values only when a row shows few
      // sections; below a pixel a section joins the one before it.
      let lastPx = -1, k = first(r, v0);
      const end = upper(list, v1);
      const detail = end - k < 400;
      for (; k < end; k++) {
        const i = list[k];
        if (t1[i] < v0) continue;
        if (S.fl[i] & (STALE | LOST | OVERLAP | OVERRAN)) { flagged.push(i); continue; }
        const px = Math.floor(x(t0[i]));
        if (!detail && px === lastPx && x(t1[i]) - px < 1) continue;
        section(i, r, detail); lastPx = px; drawn++;
      }
      // Flagged sections too join the one before them below a pixel, when
      // of one colour: a lock that fails outright flags them all.
      let lastF = -1, lastC = "";
      flagged.forEach(i => {
        const px = Math.floor(x(t0[i])), c = colour(S.fl[i]) + (S.fl[i] & OVERRAN);
        if (!detail && px === lastF && c === lastC && x(t1[i]) - px < 1 && i !== selected) return;
        section(i, r, detail); drawn++; lastF = px; lastC = c;
      });
    }
    serverRows();
    faultLabels();
    marks();
    labels();
    status.textContent = fmt(v0) + " – " + fmt(v1) + " · " + drawn + " of " + n + " sections drawn";
    status.dataset.t0 = v0; status.dataset.t1 = v1; status.dataset.drawn = drawn;
  }

  // serverRows draws the lock server's record: on each node's row, each
  // hold of the key in its holder's colour, its deadline as a lease line,
  // a tick at its end (dark: deleted, red: expired, amber: overwritten),
  // and the record's gaps shaded.
  function serverRows() {
    SV.gapAt.forEach(([a, b], k) => {
      if (b < v0 || a > v1) return;
      const y = AXIS + (NW + SV.gapNode[k]) * ROW, xa = Math.max(LABEL, x(a)), xb = Math.max(xa + 2, Math.min(width, x(b)));
      ctx.fillStyle = COLOR.gap; ctx.fillRect(xa, y, xb - xa, ROW);
    });
    ctx.font = "10px sans-serif"; ctx.textBaseline = "middle";
    let lastPx = -1, lastRow = -1;
    for (let k = 0; k < SV.t0.length; k++) {
      const a = SV.t0[k], b = SV.t1[k];
      if (b < v0 || a > v1) continue;
      const r = NW + SV.node[k], y = AXIS + r * ROW, xa = Math.max(LABEL, x(a)), xb = Math.max(xa + 1, Math.min(width, x(b)));
      if (xb - xa < 1 && Math.floor(xa) === lastPx && r === lastRow) continue;
      lastPx = Math.floor(xa); lastRow = r;
      if (SV.dl[k] >= 0) {
        ctx.fillStyle = COLOR.lease;
        ctx.fillRect(xa, y + LEASE_Y, Math.max(1, Math.min(width, x(SV.dl[k])) - xa), LEASE_H);
      }
      ctx.fillStyle = holderColour(k);
      ctx.fillRect(xa, y + BAR_Y, xb - xa > 4 ? xb - xa - 1 : xb - xa, BAR_H);
      const end = SV.ends[SV.how[k]];
      const tickC = { delete: COLOR.deleted, expire: COLOR.expired, overwrite: COLOR.overwritten }[end];
      if (tickC && xb - xa > 3) { ctx.fillStyle = tickC; ctx.fillRect(xb - 2, y + 2, 2, ROW - 4); }
      const who = SV.clients[SV.c[k]];
      if (who && xb - xa > ctx.measureText(who).width + 6) { ctx.fillStyle = "#fff"; ctx.fillText(who, xa + 2, y + BAR_Y + BAR_H / 2); }
    }
  }
  function holdWords(k) {
    const end = SV.ends[SV.how[k]], by = SV.clients[SV.by[k]];
    const how = { delete: "deleted" + (by ? " by " + by : ""), expire: "expired: its deadline passed", overwrite: "overwritten" + (by ? " by " + by : ""),
      gap: "the record lost sight of the node" }[end] || "still held at the record's end";
    return SV.nodes[SV.node[k]] + ": the key held by " + (SV.clients[SV.c[k]] || "an unnamed connection") + (SV.tok[k] ? " (token " + SV.tok[k] + ")" : "") +
      "\n" + fmt(SV.t0[k]) + " – " + fmt(SV.t1[k]) + " (" + fmt(SV.t1[k] - SV.t0[k]) + "): " + how +
      (SV.dl[k] >= 0 ? "\ndeadline " + fmt(SV.dl[k]) : "");
  }
  function serverHit(r, t, slack) {
    const node = r - NW;
    for (let k = 0; k < SV.t0.length; k++) {
      if (SV.node[k] === node && t >= SV.t0[k] - slack && t <= SV.t1[k] + slack) return { hold: k };
    }
    for (let k = 0; k < SV.gapAt.length; k++) {
      if (SV.gapNode[k] === node && t >= SV.gapAt[k][0] && t <= SV.gapAt[k][1]) return { gap: k };
    }
    return null;
  }

  // upper is the index, in a row's list, of the first section starting
  // after t.
  function upper(list, t) {
    let lo = 0, hi = list.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (t0[list[mid]] <= t) lo = mid + 1; else hi = mid; }
    return lo;
  }

  function marks() {
    ctx.font = "10px sans-serif"; ctx.textBaseline = "bottom";
    D.marks.forEach((m, k) => {
      const t = D.markAt[k];
      if (t < v0 || t > v1) return;
      const px = x(t), y = AXIS + D.markRow[k] * ROW + ROW / 2;
      ctx.fillStyle = m.final ? "#1b7f3b" : "#c77800";
      ctx.beginPath(); ctx.moveTo(px, y - 6); ctx.lineTo(px + 6, y); ctx.lineTo(px, y + 6); ctx.lineTo(px - 6, y); ctx.fill();
      const w = ctx.measureText(m.label).width;
      ctx.fillStyle = "#333"; ctx.fillText(m.label, px + 8 + w > width ? px - 8 - w : px + 8, y + 4);
    });
  }

  function labels() {
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, LABEL, AXIS + nrows * ROW + 4);
    ctx.fillStyle = "#ccc"; ctx.fillRect(LABEL - 1, 0, 1, AXIS + nrows * ROW);
    ctx.textBaseline = "middle";
    D.rows.forEach((row, r) => {
      const y = AXIS + r * ROW;
      ctx.fillStyle = r % 2 ? "#f7f7f7" : "#fff"; ctx.fillRect(0, y, LABEL - 1, ROW);
      ctx.fillStyle = "#222"; ctx.font = "12px sans-serif"; ctx.fillText(row.label, 6, y + 11);
      const procs = row.procs || [];
      const words = procs.length > 1 ? "processes " + procs.slice(0, 4).join(", ") + (procs.length > 4 ? ", …" : "") : "";
      ctx.fillStyle = "#888"; ctx.font = "10px sans-serif"; ctx.fillText(words, 6, y + 25);
    });
    SV.nodes.forEach((name, k) => {
      const y = AXIS + (NW + k) * ROW;
      ctx.fillStyle = "#eef3f8"; ctx.fillRect(0, y, LABEL - 1, ROW);
      ctx.fillStyle = "#222"; ctx.font = "12px sans-serif"; ctx.fillText(name, 6, y + 11);
      ctx.fillStyle = "#888"; ctx.font = "10px sans-serif"; ctx.fillText("lock server: who held the key", 6, y + 25);
    });
    ctx.fillStyle = "#555"; ctx.font = "11px sans-serif"; ctx.fillText("Redis clock", 6, AXIS / 2);
  }

  // view shows [a, b], within the history and at least 20 µs wide.
  function view(a, b) {
    const w = Math.max(20, Math.min(b - a, (span1 - span0) * 1.05 + 1000));
    let c = (a + b) / 2;
    c = Math.min(Math.max(c, span0 - w * 0.45), span1 + w * 0.45);
    v0 = c - w / 2; v1 = c + w / 2;
    draw();
  }
  function zoom(f, at) {
    const t = at === undefined ? (v0 + v1) / 2 : at;
    view(t - (t - v0) * f, t + (v1 - t) * f);
  }
  function fit() { const pad = (span1 - span0) * 0.02 + 1; view(span0 - pad, span1 + pad); }

  // show brings section i into view, a few leases wide, and selects it.
  function show(i) {
    const lease = S.lease[i] * 1e3 || (t1[i] - t0[i]);
    const w = Math.max(4 * lease, 3 * (t1[i] - t0[i]), 2000);
    selected = i;
    view(t0[i] - w / 3, t0[i] + 2 * w / 3);
    describe(i);
  }
  // nearest shows the violation after (dir 1) or before (-1) the one
  // selected, or the middle of the view.
  function nearest(dir) {
    if (violations.length === 0) return;
    let k = violations.indexOf(selected);
    if (k >= 0) k += dir;
    else {
      const mid = (v0 + v1) / 2;
      k = dir > 0 ? violations.findIndex(i => t0[i] > mid) : findLast(violations, i => t0[i] < mid);
    }
    show(violations[(k + violations.length) % violations.length]);
  }
  function findLast(a, p) { for (let k = a.length - 1; k >= 0; k--) if (p(a[k])) return k; return -1; }

  const RELS = D.rels;
  function words(i) {
    const wt = ["no write", "ok", "failed", "unknown (:info)"][S.wt[i]];
    const lease = S.lease[i];
    const lines = [
      "section of process " + S.proc[i] + " (" + D.rows[S.row[i]].label + "), acquired at op " + acq[i] +
        (S.fence[i] ? ", fence " + S.fence[i] : ""),
      "held " + fmt(t0[i]) + " – " + fmt(t1[i]) + " (" + fmt(t1[i] - t0[i]) + ")" + (lease ? ", lease " + lease + " ms" : ""),
      S.ra[i] >= 0 ? "read " + S.r[i] + " at " + fmt(t0[i] + S.ra[i]) : "no read",
      ...(S.ext[i] ? ["extend before the write: " + RELS[S.ext[i]]] : []),
      S.wt[i] ? "write " + S.wv[i] + " sent at " + fmt(t0[i] + S.wi[i]) + ": " + wt +
        (S.wx[i] >= 0 ? " (op " + (acq[i] + S.wx[i]) + ")" : "") : "no write",
      "release: " + (RELS[S.rel[i]] || "ok"),
    ];
    const fl = S.fl[i];
    if (fl & STALE) lines.push("STALE WRITE: sent when the counter had already reached " + S.top[i]);
    if (fl & LOST) lines.push("LOST UPDATE: a later write wrote " + S.wv[i] + " again");
    if (fl & LATE) lines.push("LATE WRITE: sent after the lease had expired");
    if (fl & OVERRAN) lines.push("held past its lease");
    if (fl & OVERLAP) lines.push("overlaps another section that may have written");
    return lines.join("\n");
  }
  function describe(i) { document.getElementById("selected").textContent = words(i); }

  function hit(px, py) {
    const r = Math.floor((py - AXIS) / ROW);
    if (r < 0 || r >= nrows || px < LABEL) return null;
    const t = tAt(px), slack = 3 * (v1 - v0) / (width - LABEL);
    if (r >= NW) return serverHit(r, t, slack);
    const list = rowSecs[r];
    let best = -1, bestD = Infinity;
    for (let k = first(r, t - slack), end = upper(list, t + slack); k < end; k++) {
      const i = list[k], d = t < t0[i] ? t0[i] - t : t > t1[i] ? t - t1[i] : 0;
      if (d <= slack && (d < bestD || d === bestD && S.fl[i])) { best = i; bestD = d; }
    }
    if (best >= 0) return { section: best };
    for (let k = 0; k < D.faults.length; k++) {
      const [a, b] = D.faultAt[k], fr = D.faultRow[k];
      if ((fr === r || fr < 0) && t >= a && t <= b) return { fault: k };
    }
    return null;
  }
  function faultWords(k) {
    const f = D.faults[k], [a, b] = D.faultAt[k];
    return f.kind + " (" + f.f + ", nemesis op " + f.idx + ")" + (f.proc >= 0 ? " of process " + f.proc : ", every process") +
      (f.failed ? "\nfailed to begin, at " + fmt(a) : "\n" + fmt(a) + " – " + fmt(b) + " (" + fmt(b - a) + ")");
  }

  // Pointer: drag pans, wheel zooms about the pointer, click selects.
  let drag = null;
  canvas.addEventListener("pointerdown", e => {
    drag = { x: e.offsetX, v0, v1, moved: false };
    canvas.setPointerCapture(e.pointerId); canvas.classList.add("dragging");
  });
  canvas.addEventListener("pointermove", e => {
    if (drag) {
      const dt = (e.offsetX - drag.x) * (drag.v1 - drag.v0) / (width - LABEL);
      if (Math.abs(e.offsetX - drag.x) > 2) drag.moved = true;
      v0 = drag.v0 - dt; v1 = drag.v1 - dt; draw();
      return;
    }
    const h = hit(e.offsetX, e.offsetY);
    if (!h) { tip.hidden = true; return; }
    tip.textContent = h.section !== undefined ? words(h.section) : h.hold !== undefined ? holdWords(h.hold) :
      h.gap !== undefined ? SV.nodes[SV.gapNode[h.gap]] + ": the record lost sight of the node" : faultWords(h.fault);
    tip.hidden = false;
    tip.style.left = Math.min(e.offsetX + 14, width - tip.offsetWidth - 4) + "px";
    tip.style.top = (e.offsetY + 14) + "px";
  });
  canvas.addEventListener("pointerup", e => {
    canvas.classList.remove("dragging");
    if (drag && !drag.moved) {
      const h = hit(e.offsetX, e.offsetY);
      if (h && h.section !== undefined) { selected = h.section; describe(h.section); draw(); }
      if (h && h.fault !== undefined) document.getElementById("selected").textContent = faultWords(h.fault);
      if (h && h.hold !== undefined) document.getElementById("selected").textContent = holdWords(h.hold);
    }
    drag = null;
  });
  canvas.addEventListener("pointerleave", () => { tip.hidden = true; });
  canvas.addEventListener("wheel", e => {
    e.preventDefault();
    zoom(Math.pow(1.0015, e.deltaY), tAt(e.offsetX));
  }, { passive: false });
  canvas.addEventListener("dblclick", e => zoom(0.5, tAt(e.offsetX)));
  document.addEventListener("keydown", e => {
    if (e.target.tagName === "INPUT" || e.ctrlKey || e.metaKey || e.altKey) return; // the browser's own
    const k = { "+": () => zoom(0.5), "=": () => zoom(0.5), "-": () => zoom(2), "0": fit, f: () => violations.length && show(violations[0]),
      n: () => nearest(1), p: () => nearest(-1),
      ArrowLeft: () => view(v0 - (v1 - v0) / 4, v1 - (v1 - v0) / 4), ArrowRight: () => view(v0 + (v1 - v0) / 4, v1 + (v1 - v0) / 4) }[e.key];
    if (k) { e.preventDefault(); k(); }
  });
  document.getElementById("fit").onclick = fit;
  document.getElementById("zoomin").onclick = () => zoom(0.5);
  document.getElementById("zoomout").onclick = () => zoom(2);
  document.getElementById("go-first").onclick = () => violations.length && show(violations[0]);
  document.getElementById("next").onclick = () => nearest(1);
  document.getElementById("prev").onclick = () => nearest(-1);
  for (const id of ["go-first", "next", "prev"]) document.getElementById(id).disabled = violations.length === 0;

  // The ops an explanation names become links to them.
  const byOp = new Map();
  function opIndex() {
    if (byOp.size) return;
    for (let i = 0; i < n; i++) { byOp.set(acq[i], { section: i }); if (S.wx[i] >= 0) byOp.set(acq[i] + S.wx[i], { section: i }); }
    D.faults.forEach((f, k) => byOp.set(f.idx, { fault: k }));
  }
  function goOp(id) {
    opIndex();
    const h = byOp.get(id);
    if (!h) return false;
    if (h.section !== undefined) { show(h.section); return true; }
    const [a, b] = D.faultAt[h.fault], w = Math.max(b - a, 1000) * 3;
    selected = -1; view(a - w / 3, a + 2 * w / 3);
    document.getElementById("selected").textContent = faultWords(h.fault);
    return true;
  }
  document.querySelectorAll(".expl").forEach(el => {
    // The text is escaped already: only digits are put back, inside a link.
    el.innerHTML = el.innerHTML.replace(/\bop (\d+)/g, (m, id) => 'op <a href="#op-' + id + '">' + id + "</a>");
    // A link shows its op at every click, not only when the address changes.
    el.querySelectorAll("a").forEach(a => a.addEventListener("click", e => {
      e.preventDefault();
      history.replaceState(null, "", a.getAttribute("href"));
      route();
    }));
  });
  function route() {
    let h = "", m;
    try { h = decodeURIComponent(location.hash.slice(1)); } catch (e) { return; }
    if (h === "first" && violations.length) show(violations[0]);
    else if ((m = /^op-(\d+)$/.exec(h))) goOp(+m[1]);
    else if ((m = /^t=([\d.]+)-([\d.]+)$/.exec(h))) view(+m[1] * 1e3, +m[2] * 1e3);
  }
  window.addEventListener("hashchange", route);

  // The violations, listed for the eye and for jumping.
  const vl = document.getElementById("violations");
  const stale = violations.filter(i => S.fl[i] & (STALE | LOST));
  if (stale.length === 0) {
    const what = violations.length && S.fl[violations[0]] & OVERLAP ? " overlapping sections" : " late writes";
    vl.textContent = violations.length ? violations.length + what + ", no stale write or lost update: " : "None: no stale write, no lost update, no overlap, no late write.";
  } else {
    const count = (f, one, many) => { const k = stale.filter(i => S.fl[i] & f).length; return k + " " + (k === 1 ? one : many); };
    vl.textContent = count(STALE, "stale write", "stale writes") + ", " + count(LOST, "write whose update was lost", "writes whose updates were lost") +
      (stale.length > 50 ? "; the first 50" : "") + ": ";
  }
  violations.slice(0, 50).forEach(i => {
    const a = document.createElement("a");
    a.href = "#"; a.textContent = (S.fl[i] & STALE ? "stale " : S.fl[i] & LOST ? "lost " : S.fl[i] & OVERLAP ? "overlap " : "late ") + fmt(t0[i]);
    a.onclick = e => { e.preventDefault(); show(i); };
    vl.appendChild(a);
  });
  document.getElementById("legend").innerHTML = [
    [COLOR.bar, "critical section, acquire to release"], [COLOR.lease, "lease window (acquire + lease)"],
    [COLOR.overran, "held past its lease"], [COLOR.overlap, "overlapping section"], [COLOR.stale, "stale write"],
    [COLOR.lost, "write whose update was lost"], [COLOR.fault, "pause or fault (SIGSTOP, in-section, link, clock, failover)"], [COLOR.kill, "kill"],
    [COLOR.read, "read"], [COLOR.write, "write sent (▼)"],
    ...(SV.nodes.length ? [[HOLDER[0], "the key held on a lock node, in its holder's colour"], [COLOR.expired, "expired"], [COLOR.deleted, "deleted"],
      [COLOR.overwritten, "overwritten"], [COLOR.gap, "record gap"]] : []),
  ].map(([c, w]) => '<span><i style="background:' + c + '"></i>' + w + "</span>").join("");

  window.addEventListener("resize", resize);
  resize();
  fit();
  // For tests and benchmarks: the view, and when the first draw ended (ms
  // from the start of navigation).
  window.timeline = {
    view, show, fit, zoom, violations, sections: n, goOp, hit, get range() { return [v0, v1]; },
    holds: SV.t0.length, holdWords,
    // Where hold k of the lock server's record is drawn, as place does.
    placeHold(k) { return { x0: x(SV.t0[k]), x1: x(SV.t1[k]), top: AXIS + (NW + SV.node[k]) * ROW, barY: BAR_Y, barH: BAR_H }; },
    // Where section i is drawn, in CSS pixels of the canvas: its bar's
    // left and right, the end of its lease, and its row's top, with the
    // bar's and the lease line's offsets in the row; and its flags.
    place(i) {
      return { x0: x(t0[i]), x1: x(t1[i]), lease: S.lease[i] ? x(t0[i] + S.lease[i] * 1e3) : null, top: AXIS + S.row[i] * ROW,
        barY: BAR_Y, barH: BAR_H, leaseY: LEASE_Y, flags: S.fl[i] };
    },
    ready: performance.now(),
  };
  route();
})();
