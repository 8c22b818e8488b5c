package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bubbuild/bub-mcp/internal/oidctest"
	"github.com/bubbuild/bub-mcp/internal/pgtest"
	"github.com/bubbuild/bub-mcp/internal/testbin"
	"github.com/jackc/pgx/v5"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	oidctest.Stop()
	testbin.Cleanup()
	os.Exit(code)
}

var urlRE = regexp.MustCompile(`url=(http://\S+)`)

// startHTTPReplica runs `bub-mcp serve --http` with its own $BUB_HOME and
// returns its base URL; the process is stopped when the test ends.
func startHTTPReplica(t *testing.T, env []string) string {
	t.Helper()
	return startHTTPReplicaBin(t, binary(t), env)
}

// startHTTPReplicaBin is startHTTPReplica for another build of bub-mcp.
func startHTTPReplicaBin(t testing.TB, bin string, env []string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--http", "127.0.0.1:0")
	cmd.Env = append(env, "BUB_HOME="+t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	urls := make(chan string, 1)
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- strings.TrimSuffix(m[1], "/mcp"):
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
		if t.Failed() {
			t.Logf("replica log:\n%s", log.String())
		}
	})
	select {
	case u := <-urls:
		return u
	case <-done:
		t.Fatalf("replica exited before listening:\n%s", log.String())
	case <-time.After(30 * time.Second):
		t.Fatal("replica did not report its URL within 30s")
	}
	return ""
}

// bufferedBody reads a request's whole body before h forwards it, as
// load balancers that buffer requests (nginx's default) do. A proxy that
// streams the body races net/http: once the backend has answered, the
// front server discards and closes the client's body as it writes the
// answer's header, while the proxy's transport is still reading that
// body for trailing bytes; the transport then closes the backend
// connection mid-answer ("http: invalid Read on closed Body") and the
// client reads an unexpected EOF.
func bufferedBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 8<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

// roundRobin is a reverse proxy that sends each request to the next
// backend, as a load balancer without sticky sessions does, streaming
// responses through as they come (event streams included).
func roundRobin(t *testing.T, backends []string) string {
	t.Helper()
	var targets []*url.URL
	for _, b := range backends {
		u, err := url.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, u)
	}
	var next atomic.Uint64
	hc := &http.Client{Transport: &http.Transport{}}
	proxy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := *targets[(next.Add(1)-1)%uint64(len(targets))]
		u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
		out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = r.Header.Clone()
		resp, err := hc.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				w.(http.Flusher).Flush() // event streams must not wait
			}
			if err != nil {
				if err != io.EOF && r.Context().Err() == nil {
					t.Logf("proxy: reading from %s: %v", u.Host, err)
				}
				return
			}
		}
	})
	srv := httptest.NewServer(bufferedBody(proxy))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestReplicasShareSessions runs three `bub-mcp serve --http` replicas,
// each with its own $BUB_HOME, on one PostgreSQL behind a round-robin
// proxy, and drives them with the mcp-go client on the sessionless
// protocol: handoffs made through all three are all on the tape with ids
// 1..N, every replica reports the same tape, and code mode switched by
// `bub-mcp call` (a fourth process) shows on all of them.
func TestReplicasShareSessions(t *testing.T) {
	dsn := pgtest.DSN(t)
	ws := t.TempDir()
	src := fmt.Sprintf("[store]\nkind = \"postgres\"\ndsn_env = \"BUB_TEST_DSN\"\n[profiles.default]\nworkspace = %q\n", ws)
	cfg := writeConfig(t, src)
	env := append(os.Environ(), "BUB_CONFIG="+cfg, "BUB_TEST_DSN="+dsn)
	var backends []string
	for i := range 3 {
		backends = append(backends, startHTTPReplica(t, append(env[:len(env):len(env)], fmt.Sprintf("BUB_REPLICA=r%d", i))))
	}
	proxy := roundRobin(t, backends)

	tr, err := transport.NewStreamableHTTP(proxy + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.LATEST_PROTOCOL_VERSION))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "replica-test", Version: "0.1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}

	const handoffs = 12 // four through each replica
	for k := range handoffs {
		handoff(t, c, fmt.Sprintf("h%d", k))
	}
	for range 3 { // one tape_info per replica
		res, err := callTool(t.Context(), c, "tape_info", nil, nil)
		if err != nil || res.IsError {
			t.Fatalf("tape_info: %v %v", err, res)
		}
		if want := fmt.Sprintf("entries: %d\nanchors: %d\nlast_anchor: h%d\n", 2*handoffs, handoffs, handoffs-1); !strings.Contains(resultText(res), want) {
			t.Errorf("tape_info = %q; want %q", resultText(res), want)
		}
	}

	// A background shell stays on its replica; asking another for it says
	// where it lives.
	res, err := callTool(t.Context(), c, "bash", map[string]any{"command": "sleep 30", "background": true}, nil)
	if err != nil || res.IsError {
		t.Fatalf("bash: %v %v", err, res)
	}
	m := regexp.MustCompile(`shell_id: (bash-[0-9a-f]+@(r\d))`).FindStringSubmatch(resultText(res))
	if m == nil {
		t.Fatalf("bash result %q has no replica-tagged shell id", resultText(res))
	}
	res, err = callTool(t.Context(), c, "bash_output", map[string]any{"shell_id": m[1]}, nil) // the next replica
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "lives on replica "+m[2]) {
		t.Errorf("bash_output on another replica = %v %q; want an error naming replica %s", err, resultText(res), m[2])
	}

	bubCall(t, env, "code_mode", "enable=true")
	// Each replica picks the switch up within its refresh interval; look
	// at each of them (round robin) until all three show it.
	deadline := time.Now().Add(10 * time.Second)
	for seen := 0; seen < 3; {
		tools := listToolsCtx(t, c)
		if _, ok := tools["run_code"]; ok {
			seen++
			continue
		}
		seen = 0
		if time.Now().After(deadline) {
			t.Fatal("code mode switched by bub-mcp call not shown by every replica within 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// In the database: every id once, in order.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT (line::jsonb->>'id')::int FROM bub_tape_lines WHERE tape NOT LIKE '%sidecar%' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2*handoffs+1 {
		t.Errorf("%d entries in the database; want %d", len(ids), 2*handoffs+1)
	}
	for i, id := range ids {
		if id != i+1 {
			t.Fatalf("ids are not 1..%d in order: %v", len(ids), ids)
		}
	}
}

func listToolsCtx(t *testing.T, c *client.Client) map[string]mcp.Tool {
	t.Helper()
	res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]mcp.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

// TestKilledReplicaLosesNothingAcknowledged SIGKILLs a replica on the
// PostgreSQL store while clients write through it: every handoff it
// acknowledged is in the database, ids run 1..N without gap or duplicate,
// and another process continues after them.
func TestKilledReplicaLosesNothingAcknowledged(t *testing.T) {
	dsn := pgtest.DSN(t)
	ws := t.TempDir()
	src := fmt.Sprintf("[store]\nkind = \"postgres\"\ndsn_env = \"BUB_TEST_DSN\"\n[profiles.default]\nworkspace = %q\n", ws)
	cfg := writeConfig(t, src)
	env := append(os.Environ(), "BUB_CONFIG="+cfg, "BUB_TEST_DSN="+dsn, "BUB_HOME="+t.TempDir())
	acked := killMidStream(t, env)
	bubCall(t, append(env[:len(env):len(env)], "BUB_HOME="+t.TempDir()), "tape.handoff", "name=after-crash", "summary=s")

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT (line::jsonb->>'id')::int, line::jsonb->>'kind', coalesce(line::jsonb->'payload'->>'name', '')
		FROM bub_tape_lines WHERE tape NOT LIKE '%sidecar%' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	n := 0
	for rows.Next() {
		var id int
		var kind, name string
		if err := rows.Scan(&id, &kind, &name); err != nil {
			t.Fatal(err)
		}
		n++
		if id != n {
			t.Fatalf("entry %d has id %d", n, id)
		}
		if kind == "anchor" {
			anchors[name] = true
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range acked {
		if !anchors[name] {
			t.Errorf("acknowledged handoff %s is not in the database", name)
		}
	}
	if !anchors["after-crash"] {
		t.Error("the handoff made after the crash is missing")
	}
}

// BenchmarkToolsList compares tools/list over HTTP (sessionless protocol)
// on the file store and on the PostgreSQL store: one `serve --http`
// process each, one client.
func BenchmarkToolsList(b *testing.B) {
	for _, kind := range []string{"file", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			ws := b.TempDir()
			src := fmt.Sprintf("[profiles.default]\nworkspace = %q\n", ws)
			env := os.Environ()
			if kind == "postgres" {
				src = "[store]\nkind = \"postgres\"\ndsn_env = \"BUB_TEST_DSN\"\n" + src
				env = append(env, "BUB_TEST_DSN="+pgtest.DSN(b))
			}
			cfg := filepath.Join(b.TempDir(), "bub.toml")
			if err := os.WriteFile(cfg, []byte(src), 0o600); err != nil {
				b.Fatal(err)
			}
			env = append(env, "BUB_CONFIG="+cfg)
			base := startHTTPReplicaBin(b, binary(b), env)
			tr, err := transport.NewStreamableHTTP(base + "/mcp")
			if err != nil {
				b.Fatal(err)
			}
			c := client.NewClient(tr, client.WithProtocolVersion(mcp.LATEST_PROTOCOL_VERSION))
			ctx := context.Background()
			if err := c.Start(ctx); err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			init := mcp.InitializeRequest{}
			init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
			init.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "0.1"}
			if _, err := c.Initialize(ctx, init); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
