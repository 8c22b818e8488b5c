package cli_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// procMemory reads a process's resident set and its peak, in bytes.
func procMemory(t *testing.T, pid int) (rss, peak int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the server's memory: %v", err)
	}
	field := func(name string) int64 {
		m := regexp.MustCompile(name + `:\s+(\d+) kB`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("/proc/%d/status has no %s", pid, name)
		}
		n, _ := strconv.ParseInt(string(m[1]), 10, 64)
		return n << 10
	}
	return field("VmRSS"), field("VmHWM")
}

// TestLargeMessageMemory sends one 12 MiB tools/call to the built binary,
// over HTTP and stdio, and checks issue 11's bounds: peak memory under
// 4×S + 32 MiB above idle, and back to within 32 MiB of idle within 30 s.
func TestLargeMessageMemory(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs Linux /proc")
	}
	const size = 12 << 20
	content := strings.Repeat("y", size)
	call := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fs_write","arguments":{"path":"big%d.txt","content":%q},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, id, id, content)
	}
	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			var (
				pid  int
				send func(line string) string
			)
			if transport == "http" {
				cmd, url, _ := startHTTP(t, "1s")
				pid = cmd.Process.Pid
				send = func(line string) string {
					req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(line))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
					req.Header.Set("Mcp-Method", "tools/call")
					req.Header.Set("Mcp-Name", "fs_write")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					b, _ := io.ReadAll(resp.Body)
					return string(b)
				}
			} else {
				cmd := exec.Command(binary(t), "serve", "--workspace", t.TempDir())
				cmd.Env = append(os.Environ(), "BUB_HOME="+t.TempDir(), "BUB_CONFIG=")
				in, _ := cmd.StdinPipe()
				out, _ := cmd.StdoutPipe()
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
				pid = cmd.Process.Pid
				r := bufio.NewReaderSize(out, 1<<20)
				send = func(line string) string {
					if _, err := io.WriteString(in, line+"\n"); err != nil {
						t.Fatal(err)
					}
					resp, err := r.ReadString('\n')
					if err != nil {
						t.Fatal(err)
					}
					return resp
				}
			}
			if got := send(strings.Replace(call(1), content, "x", 1)); !strings.Contains(got, `"result"`) {
				t.Fatalf("small call: %s", got)
			}
			time.Sleep(500 * time.Millisecond)
			idle, idlePeak := procMemory(t, pid)
			if got := send(call(2)); !strings.Contains(got, `"result"`) || strings.Contains(got, `"isError":true`) {
				t.Fatalf("12 MiB call: %.300s", got)
			}
			_, peak := procMemory(t, pid)
			if limit := max(idle, idlePeak) + 4*size + 32<<20; peak > limit {
				t.Errorf("peak RSS %d MiB for a %d MiB message; want at most %d MiB (idle %d MiB + 4×S + 32 MiB)", peak>>20, size>>20, limit>>20, idle>>20)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				rss, _ := procMemory(t, pid)
				if rss <= idle+32<<20 {
					t.Logf("idle %d MiB, peak %d MiB, back to %d MiB", idle>>20, peak>>20, rss>>20)
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("RSS still %d MiB 30 s after the call; want within 32 MiB of idle (%d MiB)", rss>>20, idle>>20)
				}
				time.Sleep(250 * time.Millisecond)
			}
		})
	}
}
