package builtin

import (
	"strings"
	"testing"
)

func TestShellIDsNameTheReplica(t *testing.T) {
	if id := newShellID(""); strings.Contains(id, "@") || !strings.HasPrefix(id, "bash-") {
		t.Errorf("file-store shell id = %q; want bash-<hex>", id)
	}
	if id := newShellID("r1"); !strings.HasPrefix(id, "bash-") || !strings.HasSuffix(id, "@r1") {
		t.Errorf("replica shell id = %q; want bash-<hex>@r1", id)
	}
	tests := []struct {
		replica, id, want string
	}{
		{"r1", "bash-1a2b3c4d@r2", "shell bash-1a2b3c4d@r2 lives on replica r2, and this is replica r1"},
		{"", "bash-1a2b3c4d@r2", "shell bash-1a2b3c4d@r2 lives on replica r2, and this is replica (none"},
		{"r1", "bash-1a2b3c4d@r1", "unknown shell id: bash-1a2b3c4d@r1"},
		{"r1", "bash-1a2b3c4d", "unknown shell id: bash-1a2b3c4d"},
		{"", "bash-1a2b3c4d", "unknown shell id: bash-1a2b3c4d"},
	}
	for _, tt := range tests {
		st := shellTable{replica: tt.replica}
		if got := st.errUnknownShell(tt.id).Error(); !strings.Contains(got, tt.want) {
			t.Errorf("replica %q, id %q: %q; want it to contain %q", tt.replica, tt.id, got, tt.want)
		}
	}
}
