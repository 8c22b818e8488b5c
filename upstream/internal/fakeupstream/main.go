// Command fakeupstream is a stdio MCP server for the upstream package's
// tests: it misbehaves on demand in ways real servers do (a slow
// initialize, a huge result, sampling and elicitation requests during a
// call, bursts of notifications/tools/list_changed), with JSON-RPC
// written by hand so that nothing a library adds hides what is on the
// wire.
//
// Flags: -init-gate F answers initialize only once the file F exists
// (a start that takes as long as the test wants). For the pinning tests,
// which restart it with another tool list: -describe tool=text sets a
// tool's description, -add name adds a tool (it answers "added <name>"),
// -rename old=new renames one (it still works); each may repeat. For the
// override tests, -echo adds echo {msg, mode} (both required; no
// annotations), which returns its arguments as JSON. For the MCP Apps
// tests (SEP-1865), -app adds the tool widget, whose _meta.ui.resourceUri
// names ui://widget/app.html, a resource it serves (unlisted, as
// text/html;profile=mcp-app) and that widget returns, and the tools
// rburst {n}, which sends notifications/resources/list_changed n times,
// bumping the generation each time (resources/list lists
// fake://gen/<generation>), and rlists, how many resources/list requests
// the server answered.
//
// Tools: big {bytes} returns a text of that many "x"; sample and elicit
// send sampling/createMessage or elicitation/create to the client during
// the call and return what came back ("error <code>: <message>" or
// "result <json>"); burst {n} bumps the tool list's generation n times,
// sending notifications/tools/list_changed each time; lists returns how
// many tools/list requests the server answered; read {path} returns the
// file's content or the error reading it (a sandbox test's probe).
// tools/list carries one
// more tool, gen_<generation>, so a client can tell which list it has.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// The MCP App -app serves.
const (
	appURI  = "ui://widget/app.html"
	appMIME = "text/html;profile=mcp-app"
	appHTML = "<!doctype html><title>widget</title><p>fake widget</p>"
)

type server struct {
	describe map[string]string // tool → description
	added    []string
	echo     bool
	app      bool
	renamed  map[string]string // old → new
	original map[string]string // new → old
	outMu    sync.Mutex
	out      *bufio.Writer
	gen      atomic.Int64
	lists    atomic.Int64
	rlists   atomic.Int64
	seq      atomic.Int64
	waitMu   sync.Mutex
	waiting  map[string]chan message
}

func (s *server) write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	s.outMu.Lock()
	defer s.outMu.Unlock()
	s.out.Write(b)
	s.out.WriteByte('\n')
	s.out.Flush()
}

func (s *server) reply(id json.RawMessage, result any) {
	s.write(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func text(t string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": t}}}
}

// ask sends a request to the client and waits for its answer.
func (s *server) ask(method string, params any) string {
	id := "fake-" + strconv.FormatInt(s.seq.Add(1), 10)
	ch := make(chan message, 1)
	s.waitMu.Lock()
	s.waiting[strconv.Quote(id)] = ch
	s.waitMu.Unlock()
	s.write(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Sprintf("error %d: %s", m.Error.Code, m.Error.Message)
		}
		return "result " + string(m.Result)
	case <-time.After(20 * time.Second):
		return "no answer"
	}
}

func (s *server) tools() []any {
	obj := map[string]any{"type": "object"}
	out := []any{}
	for _, n := range append([]string{"big", "sample", "elicit", "burst", "lists", "read"}, s.added...) {
		t := map[string]any{"name": n, "inputSchema": obj}
		if d, ok := s.describe[n]; ok {
			t["description"] = d
		}
		if r, ok := s.renamed[n]; ok {
			t["name"] = r
		}
		out = append(out, t)
	}
	if s.echo {
		str := map[string]any{"type": "string"}
		out = append(out, map[string]any{"name": "echo", "description": "Echo the arguments.", "inputSchema": map[string]any{
			"type": "object", "properties": map[string]any{"msg": str, "mode": str}, "required": []string{"msg", "mode"}}})
	}
	if s.app {
		out = append(out, map[string]any{"name": "rburst", "inputSchema": obj}, map[string]any{"name": "rlists", "inputSchema": obj})
		out = append(out, map[string]any{"name": "widget", "description": "Show the widget.", "inputSchema": obj,
			"_meta": map[string]any{"ui": map[string]any{"resourceUri": appURI, "visibility": []string{"model", "app"}}}})
	}
	return append(out, map[string]any{"name": "gen_" + strconv.FormatInt(s.gen.Load(), 10), "inputSchema": obj})
}

func (s *server) call(m message) {
	var p struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	json.Unmarshal(m.Params, &p)
	num := func(k string) int { f, _ := p.Arguments[k].(float64); return int(f) }
	if old, ok := s.original[p.Name]; ok {
		p.Name = old
	}
	for _, a := range s.added {
		if p.Name == a {
			s.reply(m.ID, text("added "+a))
			return
		}
	}
	switch p.Name {
	case "widget":
		s.reply(m.ID, text("widget shown"))
	case "rburst":
		for range num("n") {
			s.gen.Add(1)
			s.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/resources/list_changed"})
		}
		s.reply(m.ID, text("generation "+strconv.FormatInt(s.gen.Load(), 10)))
	case "rlists":
		s.reply(m.ID, text(strconv.FormatInt(s.rlists.Load(), 10)))
	case "echo":
		b, _ := json.Marshal(p.Arguments)
		s.reply(m.ID, text(string(b)))
	case "big":
		s.reply(m.ID, text(strings.Repeat("x", num("bytes"))))
	case "sample":
		s.reply(m.ID, text(s.ask("sampling/createMessage", map[string]any{
			"messages":  []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "hi"}}},
			"maxTokens": 10,
		})))
	case "elicit":
		s.reply(m.ID, text(s.ask("elicitation/create", map[string]any{
			"message": "name?", "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}},
		})))
	case "burst":
		for range num("n") {
			s.gen.Add(1)
			s.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
		}
		s.reply(m.ID, text("generation "+strconv.FormatInt(s.gen.Load(), 10)))
	case "lists":
		s.reply(m.ID, text(strconv.FormatInt(s.lists.Load(), 10)))
	case "read":
		path, _ := p.Arguments["path"].(string)
		b, err := os.ReadFile(path)
		if err != nil {
			s.reply(m.ID, text("error: "+err.Error()))
			return
		}
		s.reply(m.ID, text(string(b)))
	default:
		s.write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32602, "message": "unknown tool " + p.Name}})
	}
}

func main() {
	callDelay := flag.Duration("call-delay", 0, "sleep before answering each tools/call (a call in flight for a while)")
	gate := flag.String("init-gate", "", "answer initialize only once this file exists")
	s := &server{out: bufio.NewWriter(os.Stdout), waiting: map[string]chan message{},
		describe: map[string]string{}, renamed: map[string]string{}, original: map[string]string{}}
	pair := func(m map[string]string) func(string) error {
		return func(v string) error {
			k, val, ok := strings.Cut(v, "=")
			if !ok {
				return fmt.Errorf("want name=value, not %q", v)
			}
			m[k] = val
			return nil
		}
	}
	flag.Func("describe", "tool=description (repeatable)", pair(s.describe))
	flag.Func("rename", "old=new (repeatable)", pair(s.renamed))
	flag.Func("add", "a tool to add (repeatable)", func(v string) error { s.added = append(s.added, v); return nil })
	flag.BoolVar(&s.echo, "echo", false, "list the echo tool")
	flag.BoolVar(&s.app, "app", false, "list the widget tool and serve its MCP App resource")
	flag.Parse()
	for k, v := range s.renamed {
		s.original[v] = k
	}
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		var m message
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		switch {
		case m.Method == "" && m.ID != nil: // an answer to ask
			s.waitMu.Lock()
			ch := s.waiting[string(m.ID)]
			delete(s.waiting, string(m.ID))
			s.waitMu.Unlock()
			if ch != nil {
				ch <- m
			}
		case m.Method == "initialize":
			for *gate != "" {
				if _, err := os.Stat(*gate); err == nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			caps := map[string]any{"tools": map[string]any{"listChanged": true}}
			if s.app {
				caps["resources"] = map[string]any{}
			}
			s.reply(m.ID, map[string]any{"protocolVersion": "2025-11-25", "serverInfo": map[string]any{"name": "fake", "version": "1"},
				"capabilities": caps})
		case m.Method == "resources/list":
			s.rlists.Add(1)
			s.reply(m.ID, map[string]any{"resources": []any{map[string]any{"uri": "fake://gen/" + strconv.FormatInt(s.gen.Load(), 10), "name": "generation"}}})
		case m.Method == "resources/templates/list":
			s.reply(m.ID, map[string]any{"resourceTemplates": []any{}})
		case m.Method == "resources/read":
			var p struct {
				URI string `json:"uri"`
			}
			json.Unmarshal(m.Params, &p)
			if !s.app || p.URI != appURI {
				s.write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32002, "message": "resource not found: " + p.URI}})
				continue
			}
			s.reply(m.ID, map[string]any{"contents": []any{map[string]any{"uri": appURI, "mimeType": appMIME, "text": appHTML,
				"_meta": map[string]any{"ui": map[string]any{"prefersBorder": true}}}}})
		case m.Method == "tools/list":
			s.lists.Add(1)
			s.reply(m.ID, map[string]any{"tools": s.tools()})
		case m.Method == "tools/call":
			go func() {
				time.Sleep(*callDelay)
				s.call(m)
			}()
		case m.Method == "ping":
			s.reply(m.ID, map[string]any{})
		case m.ID != nil:
			s.write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
		}
	}
}
