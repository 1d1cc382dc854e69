package grpccerts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// File names inside a service's directory.
const (
	CertFileName = "cert.pem"
	KeyFileName  = "key.pem"
	CAFileName   = "ca.pem"
)

// layout is where the files of the service registered under id go.
func layout(root, id, name string) Files {
	dir := filepath.Join(root, dirName(id))
	return Files{
		ServiceID: id,
		Service:   name,
		Dir:       dir,
		CertFile:  filepath.Join(dir, CertFileName),
		KeyFile:   filepath.Join(dir, KeyFileName),
		CAFile:    filepath.Join(dir, CAFileName),
	}
}

// dirName is the directory name of a service ID: the ID itself when it is
// a plain file name (what operators expect to find), else a name derived
// from its hash, since an ID may hold a slash or be "..". The two forms
// cannot collide: a plain ID never contains '~'.
func dirName(id string) string {
	if plainName(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "~" + hex.EncodeToString(sum[:12])
}

func plainName(id string) bool {
	if id == "" || len(id) > 128 || strings.HasPrefix(id, ".") {
		return false
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}

// rootsPEM is the trust bundle of the roots: every root, active or not, so
// that peers whose leaves are still signed by a rotated-out root verify
// until they are re-signed.
func rootsPEM(roots *structs.IndexedCARoots) string {
	if roots == nil {
		return ""
	}
	var b strings.Builder
	for _, r := range roots.Roots {
		pem := strings.TrimSpace(r.RootCert)
		if pem == "" {
			continue
		}
		b.WriteString(pem)
		b.WriteString("\n")
	}
	return b.String()
}

// writeAtomic replaces path with data: written to a temporary file in the
// same directory, synced, then renamed over path, so that a reader sees
// the old file or the new one, never a part.
func writeAtomic(path string, data []byte, mode os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("grpccerts: write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(mode); err == nil {
		if _, err = f.Write(data); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("grpccerts: write %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("grpccerts: write %s: %w", path, err)
	}
	return nil
}

// sweep removes the directories of services that are not Connect-native
// services of the agent any more (deregistered while it was down).
func (w *Writer) sweep(current map[string]*structs.NodeService) {
	keep := make(map[string]bool, len(current))
	for id, svc := range current {
		if svc.Connect.Native {
			keep[dirName(id)] = true
		}
	}
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		w.logger.Warn("could not list the gRPC certificate directory", "dir", w.dir, "error", err)
		return
	}
	for _, e := range entries {
		if !e.IsDir() || keep[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(w.dir, e.Name())); err != nil {
			w.logger.Warn("could not remove a stale gRPC certificate directory", "dir", e.Name(), "error", err)
		}
	}
}
