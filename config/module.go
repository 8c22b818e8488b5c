package config

import (
	"fmt"
	"strings"

	"github.com/BurntSushi/toml"
)

// ModuleRef is where a module made for one use is configured, such as a
// profile's environment: the nested table [profiles.<name>.environment],
// whose kind names the module within its namespace (kind = "sandbox" is
// the module environment.sandbox) and whose other keys are that module's
// own, decoded by the module itself (Decode). The configuration knows no
// module's keys, so a third party's module brings its own.
//
// The spelling bub.toml had before modules were namespaced reads the
// same: the kind as a string (environment = "sandbox") and the kind's
// keys in a sibling table named after it ([profiles.<name>.sandbox]).
type ModuleRef struct {
	// Kind names the module within its namespace; "" means the
	// namespace's default.
	Kind string
	// Table is the key path of the table that holds the module's keys,
	// for messages: the nested table, or the old sibling one.
	Table []string
	// KindKey is the key path that chose Kind.
	KindKey []string

	cfg  *Config
	prim toml.Primitive
	has  bool // prim holds the module's keys
}

// Decode decodes the module's keys into v, a pointer to a struct with
// toml tags, leaving the fields of keys that are not set as they are. A
// key v does not know stays undecoded, so Config.Check refuses it with
// the file, line and key.
func (r *ModuleRef) Decode(v any) error {
	if r == nil || !r.has {
		return nil
	}
	c := r.cfg
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.md.PrimitiveDecode(r.prim, v); err != nil {
		return c.decodeError(err)
	}
	return nil
}

// Fail returns the error for a bad value at key within the module's
// table, naming the file and line that set it.
func (r *ModuleRef) Fail(msg string, key ...string) error {
	return r.cfg.Fail(msg, append(append([]string(nil), r.Table...), key...)...)
}

// FailKind returns the error for the module the kind chose as a whole
// (such as a missing program it needs), naming the key that chose it.
func (r *ModuleRef) FailKind(msg string) error { return r.cfg.Fail(msg, r.KindKey...) }

// Config returns the configuration the reference is part of.
func (r *ModuleRef) Config() *Config { return r.cfg }

// ModuleRefAt reads the module key at the key path (such as "profiles",
// "x", "environment") in either spelling: a table with kind and the
// kind's keys, or the kind as a string. v is the key's value, decoded
// into a toml.Primitive by the table's owner; legacy is its old sibling
// table for the kind oldKind (for a profile's environment, "sandbox" and
// [profiles.x.sandbox]), or the zero Primitive when there was none. The
// two spellings are not mixed: a message names the new one.
func (c *Config) ModuleRefAt(v toml.Primitive, oldKind string, legacy toml.Primitive, key ...string) (*ModuleRef, error) {
	key = append([]string(nil), key...)
	r := &ModuleRef{cfg: c, Table: key, KindKey: key}
	oldPath := append(append([]string(nil), key[:len(key)-1]...), oldKind)
	hasOld := oldKind != "" && c.md.IsDefined(oldPath...)
	name := strings.Join(key, ".")
	newSpelling := fmt.Sprintf("[%s] kind = %q with the %s keys in that table", name, oldKind, oldKind)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch typ := c.md.Type(key...); typ {
	case "":
		if hasOld {
			return nil, c.Fail(fmt.Sprintf("only read with %s = %q; write %s", key[len(key)-1], oldKind, newSpelling), oldPath...)
		}
	case "String":
		if err := c.md.PrimitiveDecode(v, &r.Kind); err != nil {
			return nil, c.decodeError(err)
		}
		if hasOld {
			if r.Kind != oldKind {
				return nil, c.Fail(fmt.Sprintf("only read with %s = %q, not %q; the new spelling is %s", key[len(key)-1], oldKind, r.Kind, newSpelling), oldPath...)
			}
			r.Table, r.prim, r.has = oldPath, legacy, true
		}
	case "Hash":
		var k struct {
			Kind string `toml:"kind"`
		}
		if err := c.md.PrimitiveDecode(v, &k); err != nil {
			return nil, c.decodeError(err)
		}
		if hasOld {
			return nil, c.Fail(fmt.Sprintf("the old spelling of the %s keys: with [%s], write them in that table", oldKind, name), oldPath...)
		}
		r.Kind, r.prim, r.has = k.Kind, v, true
		r.KindKey = append(append([]string(nil), key...), "kind")
	default:
		return nil, c.Fail(fmt.Sprintf("want a table [%s] with kind = \"<kind>\" and the kind's keys, or a kind as a string; got a %s", name, strings.ToLower(typ)), key...)
	}
	return r, nil
}

// IsDefined reports whether the file sets the key path.
func (c *Config) IsDefined(key ...string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.md.IsDefined(key...)
}

// NewModuleRef returns a reference to a module configured by a table the
// caller decodes itself (such as an upstream server's sandbox table):
// kind as given, the table at the key path for messages, and no keys to
// decode.
func (c *Config) NewModuleRef(kind string, table ...string) *ModuleRef {
	table = append([]string(nil), table...)
	return &ModuleRef{Kind: kind, Table: table, KindKey: table, cfg: c}
}

// ModuleTable reads a top-level table that picks a module by kind, such
// as [store] kind = "postgres", as a ModuleRef whose other keys are the
// module's; a missing table means kind "".
func (c *Config) ModuleTable(key string) (*ModuleRef, error) {
	c.mu.Lock()
	if c.claimed == nil {
		c.claimed = map[string]bool{}
	}
	c.claimed[key] = true
	prim, ok := c.tables[key]
	c.mu.Unlock()
	if !ok {
		return c.NewModuleRef("", key), nil
	}
	return c.ModuleRefAt(prim, "", toml.Primitive{}, key)
}
