// Package pgtest gives tests a real, throw-away PostgreSQL: one cluster
// per test binary, made with initdb in a temporary directory, listening on
// a free loopback port, stopped when the tests end; each test gets a
// database of its own. The binaries come from Debian's postgresql package,
// which internal/pgtest/setup.sh installs when it is missing. Without
// them a test skips, except under CI=true, where it fails.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/bubbuild/bub-mcp/internal/testenv"
	"github.com/jackc/pgx/v5"
)

var (
	once    sync.Once
	cluster *server
	failed  error
	dbs     atomic.Int64
)

type server struct {
	dir, bin, port string
	asUser         string // run the server as this user (initdb refuses root)
}

// Run runs the tests and then stops the cluster, if one was started. Use
// it from TestMain: os.Exit(pgtest.Run(m)).
func Run(m *testing.M) int {
	code := m.Run()
	if cluster != nil {
		cluster.stop()
	}
	return code
}

// DSN returns the connection string of a fresh, empty database.
func DSN(tb testing.TB) string {
	tb.Helper()
	once.Do(func() { cluster, failed = start() })
	if failed != nil {
		testenv.Missing(tb, fmt.Sprintf("pgtest: %v: run internal/pgtest/setup.sh as root to install PostgreSQL", failed))
	}
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), dbs.Add(1))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cluster.dsn("postgres"))
	if err != nil {
		tb.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	return cluster.dsn(name)
}

func (s *server) dsn(db string) string {
	return "postgres://postgres@127.0.0.1:" + s.port + "/" + db + "?sslmode=disable"
}

// binDir finds Debian's PostgreSQL binaries (the newest major version),
// or initdb on PATH.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(real), nil
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a > b
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL is not installed (no initdb)")
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

func start() (*server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bub-pgtest-")
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root; Debian's package made a
		// postgres user for it.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root and there is no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		s.asUser = "postgres"
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	for range 5 { // a port taken between freePort and the server's bind: try another
		if s.port, err = freePort(); err != nil {
			return nil, err
		}
		opts := fmt.Sprintf("-p %s -k %s -c listen_addresses=127.0.0.1 -c max_connections=200", s.port, dir)
		out, err := s.run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start")
		if err == nil {
			return s, nil
		}
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		failed = fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	return nil, failed
}

// run runs one of the PostgreSQL binaries, as the postgres user when we
// are root.
func (s *server) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	if s.asUser != "" {
		u, _ := user.Lookup(s.asUser)
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Dir = s.dir
	}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd.CombinedOutput()
}

func (s *server) stop() {
	_, _ = s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	os.RemoveAll(s.dir)
}
