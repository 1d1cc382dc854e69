package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// kvMaxValueSize is Consul's default kv_max_value_size (512 KiB): larger KV
// values are refused with 413.
const kvMaxValueSize = 512 * 1024

// kvOversizeCount bounds how much of an oversized chunked body is read to
// report its size.
const kvOversizeCount = 64 << 20

// kvSizeDocURL is the page Consul's 413 message points to.
const kvSizeDocURL = "https://developer.hashicorp.com/docs/agent/config/config-files#kv_max_value_size"

// kvEndpoint handles /v1/kv/<key> for GET, PUT and DELETE.
func (s *Server) kvEndpoint(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.KeyRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	args.Key = pathSuffix(r, "/v1/kv/")
	if args.Key != "" {
		if err := validateKVKey(args.Key); err != nil {
			return nil, badRequest(err.Error())
		}
	}
	switch r.Method {
	case http.MethodGet:
		if _, ok := r.URL.Query()["keys"]; ok {
			return s.kvGetKeys(w, r, &args)
		}
		return s.kvGet(w, r, &args)
	case http.MethodPut:
		return s.kvPut(w, r, &args)
	default:
		return s.kvDelete(w, r, &args)
	}
}

// validateKVKey applies the key checks Consul 1.22 makes by default
// (CVE-2025-11392): no path traversal, plain or %-encoded, and no leading
// or trailing spaces. Every other character is allowed. (Control characters
// never get here: the whole path is refused earlier.)
func validateKVKey(key string) error {
	if key == ".." || strings.HasPrefix(key, "../") || strings.HasSuffix(key, "/..") ||
		strings.Contains(key, "/../") || strings.Contains(key, `..\`) {
		return errors.New("invalid key name, path traversal is not allowed")
	}
	lower := strings.ToLower(key)
	for _, seq := range []string{"%2e%2e%2f", "%2e%2e/", "..%2f", "%2e%2e%5c", "..%5c"} {
		if strings.Contains(lower, seq) {
			return errors.New("invalid key name, encoded path traversal is not allowed")
		}
	}
	if strings.TrimSpace(key) != key {
		return errors.New("invalid key name, leading or trailing spaces are not allowed")
	}
	return nil
}

// kvGet reads one key, or with ?recurse every key under a prefix. A miss is
// 404 with an empty body that still carries the read headers.
func (s *Server) kvGet(w http.ResponseWriter, r *http.Request, args *structs.KeyRequest) (any, error) {
	params := r.URL.Query()
	_, recurse := params["recurse"]
	if !recurse && args.Key == "" {
		return nil, badRequest("Missing key name")
	}
	var (
		out structs.IndexedDirEntries
		err error
	)
	if recurse {
		list := structs.KeyListRequest{Prefix: args.Key, QueryOptions: args.QueryOptions}
		err = structs.MethodKVSList.Call(r.Context(), s.rpc, &list, &out)
	} else {
		err = structs.MethodKVSGet.Call(r.Context(), s.rpc, args, &out)
	}
	setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err != nil {
		return nil, err
	}
	entries := make(structs.DirEntries, 0, len(out.Entries))
	for _, e := range out.Entries {
		if e != nil {
			entries = append(entries, e)
		}
	}
	if len(entries) == 0 {
		w.WriteHeader(http.StatusNotFound)
		return nil, nil
	}
	if _, raw := params["raw"]; raw && !recurse {
		// The bare value, with the headers Consul sets so that a browser
		// never runs a stored value as a page.
		body := entries[0].Value
		h := w.Header()
		h.Set("Content-Length", strconv.Itoa(len(body)))
		h.Set("Content-Type", "text/plain")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "sandbox")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
		return nil, nil
	}
	return entries, nil
}

// kvGetKeys lists key names under a prefix (?keys), stopping at the
// ?separator (or Consul's historic ?seperator). An empty result is 404,
// except at the root, which answers [].
func (s *Server) kvGetKeys(w http.ResponseWriter, r *http.Request, args *structs.KeyRequest) (any, error) {
	params := r.URL.Query()
	list := structs.KeyListRequest{Prefix: args.Key, QueryOptions: args.QueryOptions}
	if _, ok := params["seperator"]; ok {
		list.Seperator = params.Get("seperator")
	}
	if _, ok := params["separator"]; ok {
		list.Seperator = params.Get("separator")
	}
	var out structs.IndexedKeyList
	err := structs.MethodKVSListKeys.Call(r.Context(), s.rpc, &list, &out)
	setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err != nil {
		return nil, err
	}
	if len(out.Keys) == 0 && list.Prefix != "" {
		w.WriteHeader(http.StatusNotFound)
		return nil, nil
	}
	return orEmpty(out.Keys), nil
}

// conflictingFlags refuses two of the given parameters together, with
// Consul's 400 message.
func conflictingFlags(r *http.Request, flags ...string) error {
	params := r.URL.Query()
	found := false
	for _, f := range flags {
		if _, ok := params[f]; !ok {
			continue
		}
		if found {
			return badRequest(fmt.Sprintf("Conflicting flags: %v\n", params.Encode()))
		}
		found = true
	}
	return nil
}

// kvPut writes a key: a plain set, a check-and-set (?cas), or a lock
// acquire/release (?acquire, ?release). It answers true for a plain set
// and the outcome otherwise.
func (s *Server) kvPut(w http.ResponseWriter, r *http.Request, args *structs.KeyRequest) (any, error) {
	if args.Key == "" {
		return nil, badRequest("Missing key name")
	}
	if err := conflictingFlags(r, "cas", "acquire", "release"); err != nil {
		return nil, err
	}
	req := structs.KVSRequest{
		Op:           structs.KVSet,
		DirEnt:       structs.DirEntry{Key: args.Key},
		WriteRequest: structs.WriteRequest{Datacenter: args.Datacenter, Token: args.Token},
	}
	params := r.URL.Query()
	if _, ok := params["flags"]; ok {
		// Consul reports an unparseable number as a plain (500) error.
		flags, err := strconv.ParseUint(params.Get("flags"), 10, 64)
		if err != nil {
			return nil, err
		}
		req.DirEnt.Flags = flags
	}
	if _, ok := params["cas"]; ok {
		cas, err := strconv.ParseUint(params.Get("cas"), 10, 64)
		if err != nil {
			return nil, err
		}
		req.DirEnt.ModifyIndex = cas
		req.Op = structs.KVCAS
	}
	if _, ok := params["acquire"]; ok {
		req.DirEnt.Session = params.Get("acquire")
		req.Op = structs.KVLock
	}
	if _, ok := params["release"]; ok {
		req.DirEnt.Session = params.Get("release")
		req.Op = structs.KVUnlock
	}
	value, err := readKVValue(r)
	if err != nil {
		return nil, err
	}
	req.DirEnt.Value = value
	var ok bool
	if err := structs.MethodKVSApply.Call(r.Context(), s.rpc, &req, &ok); err != nil {
		return nil, err
	}
	if req.Op == structs.KVSet {
		return true, nil
	}
	return ok, nil
}

// readKVValue reads a KV PUT body, refusing more than kvMaxValueSize bytes
// with Consul's 413, whether the size is announced or the body is chunked.
// An empty body is a nil value, as in Consul (it reads back as null).
func readKVValue(r *http.Request) ([]byte, error) {
	oversize := func(n int64) error {
		return tooLarge(fmt.Sprintf("Request body(%d bytes) too large, max size: %d bytes. See %s.",
			n, kvMaxValueSize, kvSizeDocURL))
	}
	if r.ContentLength > kvMaxValueSize {
		return nil, oversize(r.ContentLength)
	}
	if r.Body == nil {
		return nil, nil
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, kvMaxValueSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading request body: %w", err)
	}
	if len(buf) > kvMaxValueSize {
		rest, _ := io.Copy(io.Discard, io.LimitReader(r.Body, kvOversizeCount))
		return nil, oversize(int64(len(buf)) + rest)
	}
	if len(buf) == 0 {
		return nil, nil
	}
	return buf, nil
}

// kvDelete deletes a key, a whole prefix (?recurse), or a key at a given
// index (?cas). It answers true, or the CAS outcome.
func (s *Server) kvDelete(w http.ResponseWriter, r *http.Request, args *structs.KeyRequest) (any, error) {
	if err := conflictingFlags(r, "recurse", "cas"); err != nil {
		return nil, err
	}
	req := structs.KVSRequest{
		Op:           structs.KVDelete,
		DirEnt:       structs.DirEntry{Key: args.Key},
		WriteRequest: structs.WriteRequest{Datacenter: args.Datacenter, Token: args.Token},
	}
	params := r.URL.Query()
	if _, ok := params["recurse"]; ok {
		req.Op = structs.KVDeleteTree
	} else if args.Key == "" {
		return nil, badRequest("Missing key name")
	}
	if _, ok := params["cas"]; ok {
		cas, err := strconv.ParseUint(params.Get("cas"), 10, 64)
		if err != nil {
			return nil, err
		}
		req.DirEnt.ModifyIndex = cas
		req.Op = structs.KVDeleteCAS
	}
	var ok bool
	if err := structs.MethodKVSApply.Call(r.Context(), s.rpc, &req, &ok); err != nil {
		return nil, err
	}
	if req.Op == structs.KVDeleteCAS {
		return ok, nil
	}
	return true, nil
}
