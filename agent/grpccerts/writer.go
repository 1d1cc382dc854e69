// Package grpccerts keeps certificate files current for gRPC applications
// that take the mesh from xDS without a sidecar.
//
// gRPC's xDS clients and servers do not accept certificates inline in xDS
// resources: their TLS contexts name a certificate-provider plugin instance
// (gRFC A29), and the one every gRPC library ships, file_watcher, re-reads
// PEM files at an interval. So for each Connect-native service registered
// on the agent the Writer keeps, in a directory of its own under Dir:
//
//	cert.pem  the service's leaf certificate (with any intermediates)
//	key.pem   its private key, mode 0600
//	ca.pem    every root of the Connect CA
//
// Each file is replaced atomically (a temporary file in the same
// directory, then a rename), so a reader never sees half a file: the
// leaf and key on every renewal by the agent's leaf manager, the roots
// whenever they change (a CA rotation adds the new root before leaves are
// re-signed under it). A service's directory is removed when the service
// is deregistered, and at start for services no longer registered.
//
// The Writer owns one goroutine following the local services and the
// roots, and one per service following its leaf; Stop ends and waits for
// all of them.
package grpccerts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// Errors of the package.
var (
	// ErrUnknownService is returned by Files for a service ID not
	// registered on the agent.
	ErrUnknownService = errors.New("grpccerts: unknown service ID")
	// ErrNotConnectNative is returned by Files for a registered service
	// that is not Connect-native: only those get files.
	ErrNotConnectNative = errors.New("grpccerts: service is not Connect-native")
	// ErrStopped is returned by Files after Stop.
	ErrStopped = errors.New("grpccerts: writer stopped")
)

// Leaves hands out the leaf certificate of a service, blocking while its
// ModifyIndex is not past minIndex (agent/leafcert.Manager.Get).
type Leaves interface {
	Get(ctx context.Context, service, token string, minIndex uint64, wait time.Duration) (*structs.IssuedCert, error)
}

// Roots gives the CA roots last seen and a channel closed when they next
// change (agent/leafcert.Manager.WatchRoots).
type Roots interface {
	WatchRoots() (*structs.IndexedCARoots, <-chan struct{})
}

// Services reads the agent's local services (agent/local.State).
type Services interface {
	Service(id string) *structs.NodeService
	Services() map[string]*structs.NodeService
	// ServiceToken is the ACL token the service was registered with ("":
	// none), which its leaf is signed with.
	ServiceToken(id string) string
}

// ServiceChanges tells which local services changed (agent/local.State):
// ch is signalled after a change and Take returns the changed IDs.
type ServiceChanges interface {
	NotifyServiceChanges(ch chan<- struct{})
	TakeServiceChanges(ch chan<- struct{}) []string
}

// Config holds the Writer's dependencies.
type Config struct {
	// Dir is the directory the service directories go in (the agent's
	// <data_dir>/grpc-certs). Empty means a private temporary directory,
	// removed by Stop: a -dev agent keeps nothing after it exits.
	Dir string
	// Leaves, Roots, Services and Changes are required.
	Leaves   Leaves
	Roots    Roots
	Services Services
	Changes  ServiceChanges
	// Logger defaults to discarding.
	Logger *slog.Logger
	// LeafWait is the blocking time of one leaf request (default 10 min).
	LeafWait time.Duration
	// RetryMin and RetryMax bound the backoff after a failed leaf request
	// or file write (defaults 1 s and 30 s).
	RetryMin, RetryMax time.Duration
}

// Files says where a service's files are.
type Files struct {
	// ServiceID and Service are the service's ID and name.
	ServiceID string
	Service   string
	// Dir holds the three files below.
	Dir      string
	CertFile string
	KeyFile  string
	CAFile   string
	// Ready is whether all three have been written at least once.
	Ready bool
}

// Writer keeps the files. Create it with New, then Start it.
type Writer struct {
	cfg    Config
	logger *slog.Logger
	dir    string
	// ownDir is whether dir is the Writer's temporary directory.
	ownDir bool
	notify chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// Guarded by mu:
	started, stopped bool
	services         map[string]*service
	// caPEM is the roots bundle last written to every service.
	caPEM string
}

// service is one Connect-native service's files and leaf goroutine.
type service struct {
	id, name string
	files    Files
	cancel   context.CancelFunc
	// done is closed when the leaf goroutine has ended.
	done chan struct{}
	// Guarded by Writer.mu:
	certWritten, caWritten bool
	// ready is closed once certWritten and caWritten are both true.
	ready chan struct{}
}

// New checks the configuration and makes the directory.
func New(cfg Config) (*Writer, error) {
	if cfg.Leaves == nil || cfg.Roots == nil || cfg.Services == nil || cfg.Changes == nil {
		return nil, errors.New("grpccerts: Leaves, Roots, Services and Changes are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.LeafWait <= 0 {
		cfg.LeafWait = 10 * time.Minute
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 30 * time.Second
	}
	w := &Writer{cfg: cfg, logger: cfg.Logger, dir: cfg.Dir, notify: make(chan struct{}, 1), services: make(map[string]*service)}
	if w.dir == "" {
		d, err := os.MkdirTemp("", "trellis-grpc-certs-")
		if err != nil {
			return nil, fmt.Errorf("grpccerts: make a temporary directory: %w", err)
		}
		w.dir, w.ownDir = d, true
	} else if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return nil, fmt.Errorf("grpccerts: make %s: %w", w.dir, err)
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	return w, nil
}

// Dir is the directory the service directories are in.
func (w *Writer) Dir() string { return w.dir }

// Start removes the directories of services no longer registered and
// begins following the local services and the roots.
func (w *Writer) Start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started || w.stopped {
		return
	}
	w.started = true
	// Before the first read, so that no change between the read and the
	// subscription is missed.
	w.cfg.Changes.NotifyServiceChanges(w.notify)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.run()
	}()
}

// Stop ends every goroutine and waits for them. The files stay, so that
// applications keep their certificates while the agent restarts; a
// temporary directory is removed.
func (w *Writer) Stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
	if w.ownDir {
		if err := os.RemoveAll(w.dir); err != nil {
			w.logger.Warn("could not remove the gRPC certificate directory", "dir", w.dir, "error", err)
		}
	}
}

// Files says where the files of the service registered under id are,
// waiting until they are written or ctx ends (then Ready is false).
func (w *Writer) Files(ctx context.Context, id string) (Files, error) {
	svc := w.cfg.Services.Service(id)
	if svc == nil {
		return Files{}, fmt.Errorf("%w: %s", ErrUnknownService, id)
	}
	if !svc.Connect.Native {
		return Files{}, fmt.Errorf("%w: %s", ErrNotConnectNative, id)
	}
	for {
		w.mu.Lock()
		if w.stopped {
			w.mu.Unlock()
			return Files{}, ErrStopped
		}
		s := w.services[id]
		if s == nil {
			// Registered a moment ago: the run loop has not seen it yet.
			w.mu.Unlock()
			files := layout(w.dir, id, svc.Service)
			select {
			case <-ctx.Done():
				return files, nil
			case <-w.ctx.Done():
				return Files{}, ErrStopped
			case <-time.After(10 * time.Millisecond):
				continue
			}
		}
		files, ready := s.files, s.ready
		w.mu.Unlock()
		select {
		case <-ready:
			files.Ready = true
			return files, nil
		case <-ctx.Done():
			return files, nil
		case <-w.ctx.Done():
			return Files{}, ErrStopped
		}
	}
}

// run follows the local services and the roots until Stop.
func (w *Writer) run() {
	defer w.stopAll()
	roots, rootsCh := w.cfg.Roots.WatchRoots()
	w.setRoots(roots)
	current := w.cfg.Services.Services()
	w.sweep(current)
	for id, svc := range current {
		w.reconcile(id, svc)
	}
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-rootsCh:
			roots, rootsCh = w.cfg.Roots.WatchRoots()
			w.setRoots(roots)
		case <-w.notify:
			for _, id := range w.cfg.Changes.TakeServiceChanges(w.notify) {
				w.reconcile(id, w.cfg.Services.Service(id))
			}
		}
	}
}

// reconcile makes the files of the service registered under id (nil when
// it is gone) follow it: started for a Connect-native service, restarted
// when its name changed, removed otherwise.
func (w *Writer) reconcile(id string, svc *structs.NodeService) {
	w.mu.Lock()
	cur := w.services[id]
	w.mu.Unlock()
	want := svc != nil && svc.Connect.Native
	if cur != nil && (!want || cur.name != svc.Service) {
		w.remove(cur)
		cur = nil
	}
	if want && cur == nil {
		w.add(id, svc.Service)
	}
}

// add creates the service's directory, writes the roots it can and starts
// its leaf goroutine.
func (w *Writer) add(id, name string) {
	ctx, cancel := context.WithCancel(w.ctx)
	s := &service{id: id, name: name, files: layout(w.dir, id, name), cancel: cancel, done: make(chan struct{}), ready: make(chan struct{})}
	if err := os.MkdirAll(s.files.Dir, 0o700); err != nil {
		w.logger.Error("could not make a gRPC certificate directory", "service_id", id, "dir", s.files.Dir, "error", err)
	}
	w.mu.Lock()
	w.services[id] = s
	ca := w.caPEM
	w.mu.Unlock()
	if ca != "" {
		w.writeCA(s, ca)
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer close(s.done)
		w.followLeaf(ctx, s)
	}()
}

// remove stops the service's leaf goroutine, then deletes its directory:
// in that order, so that no write lands after the removal.
func (w *Writer) remove(s *service) {
	s.cancel()
	<-s.done
	w.mu.Lock()
	delete(w.services, s.id)
	w.mu.Unlock()
	if err := os.RemoveAll(s.files.Dir); err != nil {
		w.logger.Warn("could not remove a gRPC certificate directory", "service_id", s.id, "dir", s.files.Dir, "error", err)
	}
}

// stopAll ends every leaf goroutine, leaving the files in place.
func (w *Writer) stopAll() {
	w.mu.Lock()
	svcs := make([]*service, 0, len(w.services))
	for _, s := range w.services {
		svcs = append(svcs, s)
	}
	w.mu.Unlock()
	for _, s := range svcs {
		s.cancel()
		<-s.done
	}
}

// setRoots writes a changed roots bundle to every service.
func (w *Writer) setRoots(roots *structs.IndexedCARoots) {
	ca := rootsPEM(roots)
	w.mu.Lock()
	if ca == "" || ca == w.caPEM {
		w.mu.Unlock()
		return
	}
	w.caPEM = ca
	svcs := make([]*service, 0, len(w.services))
	for _, s := range w.services {
		svcs = append(svcs, s)
	}
	w.mu.Unlock()
	for _, s := range svcs {
		w.writeCA(s, ca)
	}
}

func (w *Writer) writeCA(s *service, ca string) {
	if err := writeAtomic(s.files.CAFile, []byte(ca), 0o644); err != nil {
		w.logger.Error("could not write the CA roots for gRPC", "service_id", s.id, "error", err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s.caWritten = true
	s.markReadyLocked()
}

// followLeaf writes the service's leaf and key each time the leaf manager
// has a new one, until ctx ends.
func (w *Writer) followLeaf(ctx context.Context, s *service) {
	var (
		index   uint64
		backoff time.Duration
	)
	for ctx.Err() == nil {
		cert, err := w.cfg.Leaves.Get(ctx, s.name, w.cfg.Services.ServiceToken(s.id), index, w.cfg.LeafWait)
		if err == nil && cert.ModifyIndex > index {
			err = w.writeLeaf(s, cert)
			if err == nil {
				index = cert.ModifyIndex
			}
		}
		if err == nil {
			backoff = 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		backoff = min(max(2*backoff, w.cfg.RetryMin), w.cfg.RetryMax)
		w.logger.Warn("could not keep the gRPC leaf certificate file current", "service_id", s.id, "error", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// writeLeaf writes the key before the certificate: a file_watcher that
// reads between the two renames finds a pair that does not match, refuses
// it and keeps its previous one until its next read.
func (w *Writer) writeLeaf(s *service, cert *structs.IssuedCert) error {
	if err := writeAtomic(s.files.KeyFile, []byte(cert.PrivateKeyPEM), 0o600); err != nil {
		return err
	}
	if err := writeAtomic(s.files.CertFile, []byte(cert.CertPEM), 0o644); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s.certWritten = true
	s.markReadyLocked()
	return nil
}

func (s *service) markReadyLocked() {
	if s.certWritten && s.caWritten {
		select {
		case <-s.ready:
		default:
			close(s.ready)
		}
	}
}
