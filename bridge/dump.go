package bridge

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// Graph dumps: with GRAPH_VISUALIZATION set, every compiled graph is written before and
// after the passes as GraphViz dot into PT_HPU_GRAPH_DUMP_PREFIX (default .graph_dumps),
// named <n>_<recipe>-PreGraph.dot / -PostGraph.dot (clients count *PreGraph* files).

var dumpCount atomic.Int64

func dumpDir() (string, bool) {
	if !truthy(os.Getenv("GRAPH_VISUALIZATION")) {
		return "", false
	}
	d := os.Getenv("PT_HPU_GRAPH_DUMP_PREFIX")
	if d == "" {
		d = ".graph_dumps"
	}
	return d, true
}

func dumpGraph(g *graph, p *plan, id string) {
	dir, ok := dumpDir()
	if !ok {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		logf(levelWarning, "graph dump: %v", err)
		return
	}
	n := dumpCount.Add(1)
	base := filepath.Join(dir, fmt.Sprintf("%04d_%s", n, id))
	write := func(suffix, text string) {
		if err := os.WriteFile(base+suffix, []byte(text), 0o644); err != nil {
			logf(levelWarning, "graph dump: %v", err)
		}
	}
	write("-PreGraph.dot", preDot(g, id))
	write("-PostGraph.dot", postDot(g, p, id))
}

func storageLabel(g *graph, s int32) string {
	if s == hostSnap {
		return "host"
	}
	state := "live"
	if g.dead[s] {
		state = "dead"
	}
	return fmt.Sprintf("s%d\\n%d B, %s", s, g.stos[s].size, state)
}

func operandLabel(a operand) string {
	return fmt.Sprintf("%v%v", a.t.DType, a.t.Sizes)
}

// edges draws storage -> node for reads and node -> storage for writes.
func edges(b *strings.Builder, g *graph, id string, ni int, seen map[int32]bool) {
	n := &g.nodes[ni]
	for j, a := range n.args {
		if a.sto == noStorage {
			continue
		}
		sn := fmt.Sprintf("s%d", a.sto)
		if a.sto == hostSnap {
			sn = fmt.Sprintf("h%d", ni)
		}
		if !seen[a.sto] || a.sto == hostSnap {
			seen[a.sto] = true
			fmt.Fprintf(b, "  %s [shape=ellipse,label=\"%s\"];\n", sn, storageLabel(g, a.sto))
		}
		if n.eff.writesOp(j) {
			fmt.Fprintf(b, "  %s -> %s [label=\"%s\"];\n", id, sn, operandLabel(a))
		}
		if n.eff.reads(j) {
			fmt.Fprintf(b, "  %s -> %s [label=\"%s\"];\n", sn, id, operandLabel(a))
		}
	}
}

func preDot(g *graph, id string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph \"%s_PreGraph\" {\n  label=\"%s before passes: %d ops, %d storages (%s)\";\n", id, id, len(g.nodes), len(g.stos), g.reason)
	seen := map[int32]bool{}
	for i := range g.nodes {
		nid := fmt.Sprintf("n%d", i)
		fmt.Fprintf(&b, "  %s [shape=box,label=\"%d: %s\"];\n", nid, i, g.nodes[i].op.Name)
		edges(&b, g, nid, i, seen)
	}
	b.WriteString("}\n")
	return b.String()
}

func postDot(g *graph, p *plan, id string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph \"%s_PostGraph\" {\n  label=\"%s after passes: %d steps, %d removed, %d fused, %d virtual, %d in reused buffers (%d B)\";\n",
		id, id, len(p.steps), len(p.removed), p.fused, p.virtuals, len(p.elided), p.reusedBytes)
	seen := map[int32]bool{}
	for k, st := range p.steps {
		sid := fmt.Sprintf("k%d", k)
		if st.group == nil {
			fmt.Fprintf(&b, "  %s [shape=box,label=\"%d: %s\"];\n", sid, st.node, g.nodes[st.node].op.Name)
			edges(&b, g, sid, st.node, seen)
			continue
		}
		names := make([]string, len(st.group.nodes))
		for i, ni := range st.group.nodes {
			names[i] = fmt.Sprintf("%d: %s", ni, g.nodes[ni].op.Name)
		}
		fmt.Fprintf(&b, "  %s [shape=box,style=filled,fillcolor=lightblue,label=\"fused\\n%s\"];\n", sid, strings.Join(names, "\\n"))
		virt := map[int32]bool{}
		for k, r := range st.group.reps {
			if st.group.virtual[k] {
				virt[g.nodes[r[0]].args[r[1]].sto] = true
			}
		}
		for _, ni := range st.group.nodes {
			for _, a := range g.nodes[ni].args {
				if a.sto >= 0 && !virt[a.sto] && !seen[a.sto] {
					seen[a.sto] = true
					fmt.Fprintf(&b, "  s%d [shape=ellipse,label=\"%s\"];\n", a.sto, storageLabel(g, a.sto))
				}
			}
		}
		drawn := map[string]bool{}
		for _, ni := range st.group.nodes {
			for j, a := range g.nodes[ni].args {
				if a.sto < 0 || virt[a.sto] {
					continue
				}
				e := fmt.Sprintf("  s%d -> %s;\n", a.sto, sid)
				if j == 0 {
					e = fmt.Sprintf("  %s -> s%d;\n", sid, a.sto)
				}
				if !drawn[e] {
					drawn[e] = true
					b.WriteString(e)
				}
			}
		}
	}
	// Storages that run in another's buffer (in-place reuse): drawn dashed, with an edge to
	// the buffer they use.
	for _, x := range p.elided {
		to := p.remap[x]
		fmt.Fprintf(&b, "  s%d [shape=ellipse,style=dashed,label=\"%s\\nin buffer of s%d\"];\n", x, storageLabel(g, x), to)
		fmt.Fprintf(&b, "  s%d [shape=ellipse,label=\"%s\"];\n", to, storageLabel(g, to))
		fmt.Fprintf(&b, "  s%d -> s%d [style=dashed,label=\"reuses\"];\n", x, to)
	}
	b.WriteString("}\n")
	return b.String()
}
