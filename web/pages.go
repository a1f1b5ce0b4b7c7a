package web

import (
	"html/template"
	"net/url"
	"path"
	"strings"
)

// The pages: html/template escapes every value taken from a run (names,
// explanations) for the place it goes; runURL and fileURL escape a path in
// the store for a URL's path first, so that a name with #, ? or % in it
// leads to itself.

// css is the pages' style, inline: the pages' Content-Security-Policy
// allows it by its hash.
const css = `
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; }
td, th { padding: 0.3em 0.6em; border-bottom: 1px solid #ddd; text-align: left; vertical-align: top; }
th a { color: inherit; }
.true { background: #adf6b0; } .false { background: #f6b0ad; } .unknown { background: #ffe3a0; }
.verdict { font-weight: bold; padding: 0.1em 0.5em; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
.muted { color: #777; }
h2 .muted { font-size: 0.7em; font-weight: normal; }
iframe.timeline { width: 100%; height: 760px; border: 1px solid #ddd; }
.comparison { background: #dde5f0; }
table.grid th { cursor: pointer; user-select: none; }
table.grid th[aria-sort=ascending]::after { content: " \25B2"; }
table.grid th[aria-sort=descending]::after { content: " \25BC"; }
td.num { text-align: right; white-space: nowrap; }
.run { padding: 0 0.4em; margin-right: 0.2em; color: #222; }
`

// sortJS sorts a comparison's table by the column whose head is clicked,
// ascending, then descending: by each cell's data-sort, a number, where it
// has one, else by its text. The pages' Content-Security-Policy allows it
// by its hash, and no other script.
const sortJS = `
for (const th of document.querySelectorAll("table.grid th")) {
  th.addEventListener("click", () => {
    const table = th.closest("table"), body = table.tBodies[0], i = th.cellIndex;
    const asc = th.getAttribute("aria-sort") !== "ascending";
    for (const h of table.querySelectorAll("th")) h.removeAttribute("aria-sort");
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    const key = (tr) => tr.cells[i].dataset.sort ?? tr.cells[i].textContent;
    const num = (x) => x !== "" && !isNaN(x);
    const rows = [...body.rows].sort((a, b) => {
      const x = key(a), y = key(b);
      const c = num(x) && num(y) ? x - y : x.localeCompare(y);
      return asc ? c : -c;
    });
    body.append(...rows);
  });
}
`

// pathURL escapes each segment of name, a path in the store, for a URL's
// path: "" for the store itself.
func pathURL(name string) string {
	if name == "." {
		return ""
	}
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// runURL is the address of the page of the run or comparison named name.
func runURL(name string) string { return "/run/" + pathURL(name) }

// fileURL is the address of the file file of the run named name.
func fileURL(name, file string) string { return "/file/" + pathURL(path.Join(name, file)) }

// parse parses a page's template, with runURL and fileURL.
func parse(name, text string) *template.Template {
	return template.Must(template.New(name).Funcs(template.FuncMap{"runURL": runURL, "fileURL": fileURL,
		"inc": func(i int) int { return i + 1 }}).Parse(text))
}

var indexPage = parse("index", `<!doctype html>
<html><head><meta charset="utf-8"><title>hiatus: runs</title><style>`+css+`</style></head><body>
<h1>Runs</h1>
<p class="muted">{{.Store}}: {{len .Runs}} of {{.Total}} runs and comparisons, newest first.
Verdicts as Jepsen colours them: <span class="verdict true">valid</span> <span class="verdict false">invalid</span>
<span class="verdict unknown">unknown</span>.</p>
<form method="get"><input name="q" value="{{.Q}}" placeholder="filter: name, lock, verdict…"> <button>filter</button></form>
<table>
<tr><th><a href="?sort=name&amp;q={{.Q}}">name</a></th><th><a href="?q={{.Q}}">started (UTC)</a></th><th>configuration</th>
<th><a href="?sort=verdict&amp;q={{.Q}}">valid?</a></th><th>figures</th></tr>
{{range .Runs}}<tr>
<td><a href="{{runURL .Rel}}">{{.Name}}</a>{{if .Timeline}} <a class="muted" href="{{fileURL .Rel "timeline.html"}}">timeline</a>{{end}}</td>
<td>{{.Started.Format "2006-01-02 15:04:05"}}</td>
<td>{{.Config}}</td>
{{if .Compare}}<td class="muted">a grid of runs</td>{{else}}<td class="verdict {{.Verdict}}">{{.Verdict}}</td>{{end}}
<td>{{.Figures}}</td>
</tr>{{else}}<tr><td colspan="5">No runs here yet: <code>hiatus run --store …</code> makes one.</td></tr>{{end}}
</table>
</body></html>`)

var runPage = parse("run", `<!doctype html>
<html><head><meta charset="utf-8"><title>hiatus: {{.Name}} {{.Started.Format "2006-01-02 15:04:05"}}</title><style>`+css+`</style></head><body>
<p><a href="/">all runs</a></p>
<h1>{{.Name}} {{if .Compare}}<span class="verdict comparison">comparison</span>{{else}}<span class="verdict {{.Verdict}}">valid? {{.Verdict}}</span>{{end}}</h1>
<p>{{.Started.Format "2006-01-02 15:04:05"}} UTC · {{.Config}}</p>
{{if .Figures}}<p>{{.Figures}}</p>{{end}}
{{range .Checks}}{{if .Explanation}}<p><span class="verdict {{.Verdict}}">{{.Name}}</span> {{.Explanation}}</p>{{end}}{{end}}
{{if .Checks}}<table><tr><th>check</th><th>valid?</th></tr>
{{range .Checks}}<tr><td>{{.Name}}</td><td class="verdict {{.Verdict}}">{{.Verdict}}</td></tr>{{end}}</table>{{end}}
{{with .Grid}}<h2>Table</h2>
<p><code>{{.Command}}</code>: {{len .Rows}} rows of {{.RunsPerRow}} runs; each figure is min–max over a row's runs.
{{if not .Complete}}<strong>Incomplete:</strong> rows with fewer runs were cut short or not collected.{{end}}
<span class="muted">Click a column's head to sort by it, again to reverse.</span></p>
<table class="grid"><thead><tr><th>row</th><th>setup</th><th>writes</th><th>lost</th><th>overlapping-sections</th><th>stale-rejected</th>
<th>lost / 1,000 sections</th><th>valid</th><th>invalid</th><th>unknown</th><th>runs</th></tr></thead>
<tbody>{{range $i, $r := .Rows}}<tr><td class="num" data-sort="{{inc $i}}">{{inc $i}}</td><td>{{.Label}}</td>
<td class="num" data-sort="{{.Writes.Min}}">{{.Writes}}</td><td class="num" data-sort="{{.LostMin.Min}}">{{.Lost}}</td>
<td class="num" data-sort="{{.Overlapping.Min}}">{{.Overlapping}}</td><td class="num" data-sort="{{.Rejected.Min}}">{{.Rejected}}</td>
<td class="num" data-sort="{{.LostPer1000.Mean}}">{{.Per1000}}</td>
<td class="num{{if .Valid}} verdict true{{end}}" data-sort="{{.Valid}}">{{.Valid}}</td>
<td class="num{{if .Invalid}} verdict false{{end}}" data-sort="{{.Invalid}}">{{.Invalid}}</td>
<td class="num{{if .Unknown}} verdict unknown{{end}}" data-sort="{{.Unknown}}">{{.Unknown}}</td>
<td>{{range $j, $run := .Runs}}{{if .Link}}<a class="run {{.Verdict}}" href="{{.Link}}" title="run {{inc $j}}: valid? {{.Verdict}}">{{inc $j}}</a>{{else}}<span class="run {{.Verdict}}" title="run {{inc $j}}: not in this store">{{inc $j}}</span>{{end}}{{end}}</td></tr>
{{end}}</tbody></table>
<script>`+sortJS+`</script>
{{else}}{{if .Table}}<h2>Table</h2><pre>{{.Table}}</pre>{{end}}{{end}}
{{$rel := .Rel}}{{if .Timeline}}<h2>Timeline <a class="muted" href="{{fileURL $rel "timeline.html"}}">open on its own</a></h2>
<iframe class="timeline" src="{{fileURL $rel "timeline.html"}}" loading="lazy" title="timeline"></iframe>{{end}}{{range .Plots}}<div><img src="{{fileURL $rel .}}" alt="{{.}}"></div>{{end}}
{{if .Children}}<h2>Runs</h2><table><tr><th>run</th><th>configuration</th><th>valid?</th><th>figures</th></tr>
{{range .Children}}<tr><td><a href="{{runURL .Rel}}">{{.Name}}</a></td><td>{{.Config}}</td>
<td class="verdict {{.Verdict}}">{{.Verdict}}</td><td>{{.Figures}}</td></tr>{{end}}</table>{{end}}
<h2>Files</h2><ul>{{range .Files}}<li><a href="{{fileURL $rel .}}">{{.}}</a></li>{{end}}</ul>
</body></html>`)
