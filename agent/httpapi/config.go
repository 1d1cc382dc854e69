package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// Config entries: PUT /v1/config, GET /v1/config/<kind>[/<name>] and
// DELETE /v1/config/<kind>/<name>, with Consul's status codes: an
// undecodable body or unknown kind on PUT is 400 "Request decoding failed:
// ...", validation failures are 500, a missing entry is 404 "Config entry
// not found for ...".

// configApply serves PUT /v1/config (?cas=N): it answers true, or false
// when the check-and-set failed.
func (s *Server) configApply(w http.ResponseWriter, r *http.Request) (any, error) {
	args := structs.ConfigEntryRequest{Op: structs.ConfigEntryUpsert}
	s.parseWrite(r, &args.WriteRequest)
	body, err := readBody(r, maxJSONBody)
	if errors.Is(err, errBodyTooLarge) {
		return nil, tooLarge(fmt.Sprintf("Request body too large, max size: %d bytes", maxJSONBody))
	}
	if err == nil {
		args.Entry, err = structs.DecodeConfigEntryJSON(body)
	}
	if err != nil {
		return nil, badRequest(fmt.Sprintf("Request decoding failed: %v", err))
	}
	if casStr := r.URL.Query().Get("cas"); casStr != "" {
		cas, err := strconv.ParseUint(casStr, 10, 64)
		if err != nil {
			return nil, err
		}
		args.Op = structs.ConfigEntryUpsertCAS
		args.Entry.GetRaftIndex().ModifyIndex = cas
	}
	var ok bool
	if err := structs.MethodConfigEntryApply.Call(r.Context(), s.rpc, &args, &ok); err != nil {
		return nil, err
	}
	return ok, nil
}

// configEndpoint serves GET and DELETE under /v1/config/.
func (s *Server) configEndpoint(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method == http.MethodDelete {
		return s.configDelete(w, r)
	}
	return s.configGet(w, r)
}

// configGet reads one entry (kind and name) or lists a kind (kind only;
// every kind for an empty path), blocking.
func (s *Server) configGet(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.ConfigEntryQuery
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	kind, name, hasName := strings.Cut(pathSuffix(r, "/v1/config/"), "/")
	args.Kind = kind
	if !hasName {
		var out structs.IndexedConfigEntries
		if err := structs.MethodConfigEntryList.Call(r.Context(), s.rpc, &args, &out); err != nil {
			return nil, err
		}
		setMeta(w, &out.QueryMeta, &args.QueryOptions)
		if out.Entries == nil {
			out.Entries = []structs.ConfigEntry{}
		}
		return out.Entries, nil
	}
	args.Name = name
	var out structs.ConfigEntryResponse
	if err := structs.MethodConfigEntryGet.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if out.Entry == nil {
		return nil, &httpError{code: http.StatusNotFound, msg: fmt.Sprintf("Config entry not found for %q / %q", kind, name)}
	}
	return out.Entry, nil
}

// configDelete deletes an entry (?cas=N). It answers {} without CAS, and
// the outcome with it.
func (s *Server) configDelete(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.ConfigEntryRequest
	s.parseWrite(r, &args.WriteRequest)
	kind, name, ok := strings.Cut(pathSuffix(r, "/v1/config/"), "/")
	if !ok {
		return nil, &httpError{code: http.StatusNotFound, msg: "Must provide both a kind and name to delete"}
	}
	entry, err := structs.MakeConfigEntry(kind, name)
	if err != nil {
		return nil, badRequest(err.Error())
	}
	args.Op, args.Entry = structs.ConfigEntryDelete, entry
	if casStr := r.URL.Query().Get("cas"); casStr != "" {
		cas, err := strconv.ParseUint(casStr, 10, 64)
		if err != nil {
			return nil, err
		}
		args.Op = structs.ConfigEntryDeleteCAS
		entry.GetRaftIndex().ModifyIndex = cas
	}
	var out structs.ConfigEntryDeleteResponse
	if err := structs.MethodConfigEntryDelete.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	if args.Op == structs.ConfigEntryDeleteCAS {
		return out.Deleted, nil
	}
	return struct{}{}, nil
}

// exportedServices serves GET /v1/exported-services: the services the
// exported-services entry exports, wildcards resolved, each with its
// consumers (blocking). Without an entry the answer is [].
func (s *Server) exportedServices(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.ExportedServicesQuery
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.IndexedExportedServices
	if err := structs.MethodExportedServicesList.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if out.Services == nil {
		out.Services = []structs.ResolvedExportedService{}
	}
	return out.Services, nil
}
