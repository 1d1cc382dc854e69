package config

import (
	"encoding/base64"
	"os"
	"strings"

	"github.com/hashicorp/memberlist"
)

// buildEncrypt checks the gossip key and reports, with Consul's words,
// a keyring file that will be used instead of it.
func buildEncrypt(s *source, rc *RuntimeConfig, p *problems) []string {
	rc.Encrypt = Encrypt{
		Key:                strings.TrimSpace(deref(s.Encrypt)),
		VerifyIncoming:     *s.EncryptVerifyIncoming,
		VerifyOutgoing:     *s.EncryptVerifyOutgoing,
		DisableKeyringFile: *s.DisableKeyringFile,
	}
	if rc.Encrypt.Key == "" {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(rc.Encrypt.Key)
	if err == nil {
		err = memberlist.ValidateKey(raw)
	}
	if err != nil {
		// The key itself is a secret: name the setting, not its value.
		p.add("encrypt has invalid key: %v (generate one with `trellis keygen`)", err)
		return nil
	}
	var warnings []string
	pools := []struct{ name, file string }{{"LAN", LANKeyringFile}}
	if rc.ServerMode {
		pools = append(pools, struct{ name, file string }{"WAN", WANKeyringFile})
	}
	for _, pool := range pools {
		path := rc.KeyringPath(pool.file)
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err == nil {
			warnings = append(warnings, "WARNING: "+pool.name+" keyring exists but -encrypt given, using keyring")
		}
	}
	return warnings
}
