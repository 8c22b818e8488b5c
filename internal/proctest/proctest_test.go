package proctest

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestGone(t *testing.T) {
	if Gone(os.Getpid()) {
		t.Fatal("Gone(self) = true")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if Gone(pid) {
		t.Fatal("running child reported gone")
	}
	cmd.Process.Kill()
	WaitGone(t, 10*time.Second, pid) // a zombie until Wait: counts as gone
	cmd.Wait()
	if !Gone(pid) {
		t.Fatal("reaped child not gone")
	}
}
