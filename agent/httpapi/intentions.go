package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// Intentions: /v1/connect/intentions (GET lists, POST creates by ID),
// .../exact (GET, PUT, DELETE by source and destination), .../match,
// .../check, and .../<id> (GET, PUT, DELETE: the deprecated ID-based API).
// Intentions are stored as service-intentions config entries; see
// server/intention_legacy.go for how ID-based ones are.

// intentionCreateResponse is the answer to an ID-based create or update.
type intentionCreateResponse struct{ ID string }

// intentions serves /v1/connect/intentions: GET lists, POST creates.
func (s *Server) intentions(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method == http.MethodPost {
		return s.intentionWriteByID(r, structs.IntentionOpCreate, "")
	}
	return s.intentionList(w, r)
}

// intentionByID serves /v1/connect/intentions/<id>: GET reads, PUT
// replaces and DELETE deletes the intention with that ID.
func (s *Server) intentionByID(w http.ResponseWriter, r *http.Request) (any, error) {
	id := strings.TrimPrefix(r.URL.Path, "/v1/connect/intentions/")
	switch r.Method {
	case http.MethodGet:
		return s.intentionGetByID(w, r, id)
	case http.MethodPut:
		return s.intentionWriteByID(r, structs.IntentionOpUpdate, id)
	default:
		args := structs.IntentionRequest{Op: structs.IntentionOpDelete, Intention: &structs.Intention{ID: id}}
		s.parseWrite(r, &args.WriteRequest)
		var ignored string
		if err := structs.MethodIntentionApply.Call(r.Context(), s.rpc, &args, &ignored); err != nil {
			return nil, err
		}
		return true, nil
	}
}

// intentionWriteByID creates (op create, no id) or replaces (op update)
// the intention in the body; it answers {"ID": ...}.
func (s *Server) intentionWriteByID(r *http.Request, op structs.IntentionOp, id string) (any, error) {
	args := structs.IntentionRequest{Op: op}
	s.parseWrite(r, &args.WriteRequest)
	var ixn structs.Intention
	if err := decodeRequest(r, &ixn); err != nil {
		return nil, err
	}
	for _, ns := range []struct{ field, value string }{{"SourceNS", ixn.SourceNS}, {"DestinationNS", ixn.DestinationNS}} {
		if ns.value != "" && ns.value != structs.IntentionDefaultNamespace {
			return nil, badRequest(fmt.Sprintf("Invalid %s %q: Namespaces are a Consul Enterprise feature", ns.field, ns.value))
		}
	}
	ixn.SourceNS, ixn.DestinationNS = structs.IntentionDefaultNamespace, structs.IntentionDefaultNamespace
	if op == structs.IntentionOpUpdate {
		ixn.ID = id // the URL's, whatever the body says
	}
	args.Intention = &ixn
	var reply string
	if err := structs.MethodIntentionApply.Call(r.Context(), s.rpc, &args, &reply); err != nil {
		return nil, err
	}
	return intentionCreateResponse{ID: reply}, nil
}

// intentionGetByID reads one intention by ID: 404 when there is none, 400
// for an ID that is not a UUID. Consul's text is its UUID index's ("failed
// intention lookup: index error: UUID must be 36 characters"), and clients
// look for "UUID" in it.
func (s *Server) intentionGetByID(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	args := structs.IntentionQueryRequest{IntentionID: id}
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	if err := structs.ParseUUID(id); err != nil {
		return nil, badRequest(fmt.Sprintf("failed intention lookup: index error: invalid UUID %q: %v", id, err))
	}
	return s.intentionGetOne(w, r, &args)
}

// intentionGetOne reads the one intention args names (by ID or by source
// and destination); a missing one is a 404. Consul ignores ?filter= on
// these reads.
func (s *Server) intentionGetOne(w http.ResponseWriter, r *http.Request, args *structs.IntentionQueryRequest) (any, error) {
	args.Filter = ""
	var out structs.IndexedIntentions
	err := structs.MethodIntentionGet.Call(r.Context(), s.rpc, args, &out)
	setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err != nil {
		if errors.Is(err, structs.ErrIntentionNotFound) {
			return nil, &httpError{code: http.StatusNotFound, msg: err.Error()}
		}
		return nil, err
	}
	if len(out.Intentions) == 0 {
		w.WriteHeader(http.StatusNotFound)
		return nil, nil
	}
	return out.Intentions[0], nil
}

// intentionList serves GET /v1/connect/intentions (blocking).
func (s *Server) intentionList(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.DCSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.IndexedIntentions
	err := structs.MethodIntentionList.Call(r.Context(), s.rpc, &args, &out)
	setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err != nil {
		return nil, err
	}
	if out.Intentions == nil {
		out.Intentions = structs.Intentions{}
	}
	return out.Intentions, nil
}

// intentionExact serves /v1/connect/intentions/exact?source=&destination=.
func (s *Server) intentionExact(w http.ResponseWriter, r *http.Request) (any, error) {
	switch r.Method {
	case http.MethodGet:
		return s.intentionGetExact(w, r)
	case http.MethodPut:
		return s.intentionPutExact(w, r)
	default:
		return s.intentionDeleteExact(w, r)
	}
}

// parseIntentionName reads a source or destination: a service name, "*",
// or "default/<name>" (the only namespace).
func parseIntentionName(param, input string) (string, error) {
	ns, name, ok := strings.Cut(input, "/")
	if !ok {
		return input, nil
	}
	if strings.Contains(name, "/") {
		return "", fmt.Errorf("%s %q is invalid: input can contain at most one '/'", param, input)
	}
	if ns != structs.IntentionDefaultNamespace {
		return "", fmt.Errorf("%s %q is invalid: Namespaces are a Consul Enterprise feature", param, input)
	}
	return name, nil
}

// parseIntentionQueryExact reads ?source= and ?destination=, each required
// exactly once and non-empty.
func parseIntentionQueryExact(r *http.Request) (*structs.IntentionQueryExact, error) {
	q := r.URL.Query()
	source, ok := q["source"]
	if !ok || len(source) != 1 || source[0] == "" {
		return nil, errors.New("required query parameter 'source' not set")
	}
	destination, ok := q["destination"]
	if !ok || len(destination) != 1 || destination[0] == "" {
		return nil, errors.New("required query parameter 'destination' not set")
	}
	src, err := parseIntentionName("source", source[0])
	if err != nil {
		return nil, err
	}
	dst, err := parseIntentionName("destination", destination[0])
	if err != nil {
		return nil, err
	}
	return &structs.IntentionQueryExact{SourceName: src, DestinationName: dst}, nil
}

func (s *Server) intentionGetExact(w http.ResponseWriter, r *http.Request) (any, error) {
	args := structs.IntentionQueryRequest{}
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	exact, err := parseIntentionQueryExact(r)
	if err != nil {
		return nil, err
	}
	args.Exact = exact
	return s.intentionGetOne(w, r, &args)
}

// intentionPutExact creates or replaces the intention from the body under
// the source and destination of the URL; it answers true.
func (s *Server) intentionPutExact(w http.ResponseWriter, r *http.Request) (any, error) {
	exact, err := parseIntentionQueryExact(r)
	if err != nil {
		return nil, err
	}
	args := structs.IntentionRequest{Op: structs.IntentionOpUpsert}
	s.parseWrite(r, &args.WriteRequest)
	var ixn structs.Intention
	if err := decodeRequest(r, &ixn); err != nil {
		return nil, err
	}
	// The identity comes from the URL; a legacy ID in the body is dropped.
	ixn.ID = ""
	ixn.SourceName, ixn.DestinationName = exact.SourceName, exact.DestinationName
	ixn.SourceNS, ixn.DestinationNS = structs.IntentionDefaultNamespace, structs.IntentionDefaultNamespace
	args.Intention = &ixn
	var ignored string
	if err := structs.MethodIntentionApply.Call(r.Context(), s.rpc, &args, &ignored); err != nil {
		return nil, err
	}
	return true, nil
}

// intentionDeleteExact deletes the intention; a missing one is not an
// error. It answers true.
func (s *Server) intentionDeleteExact(w http.ResponseWriter, r *http.Request) (any, error) {
	exact, err := parseIntentionQueryExact(r)
	if err != nil {
		return nil, err
	}
	args := structs.IntentionRequest{Op: structs.IntentionOpDelete, Intention: &structs.Intention{
		SourceName: exact.SourceName, DestinationName: exact.DestinationName,
	}}
	s.parseWrite(r, &args.WriteRequest)
	var ignored string
	if err := structs.MethodIntentionApply.Call(r.Context(), s.rpc, &args, &ignored); err != nil {
		return nil, err
	}
	return true, nil
}

// intentionMatch serves GET /v1/connect/intentions/match?by=&name=...: a
// map from each name to the intentions that apply to it, by precedence.
func (s *Server) intentionMatch(w http.ResponseWriter, r *http.Request) (any, error) {
	args := structs.IntentionQueryRequest{Match: &structs.IntentionQueryMatch{}}
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	q := r.URL.Query()
	by, ok := q["by"]
	if !ok || len(by) != 1 {
		return nil, errors.New("required query parameter 'by' not set")
	}
	switch t := structs.IntentionMatchType(by[0]); t {
	case structs.IntentionMatchSource, structs.IntentionMatchDestination:
		args.Match.Type = t
	default:
		return nil, errors.New("'by' parameter must be one of 'source' or 'destination'")
	}
	names, ok := q["name"]
	if !ok || len(names) == 0 {
		return nil, errors.New("required query parameter 'name' not set")
	}
	for _, n := range names {
		name, err := parseIntentionName("name", n)
		if err != nil {
			return nil, err
		}
		args.Match.Names = append(args.Match.Names, name)
	}
	var out structs.IndexedIntentionMatches
	err := structs.MethodIntentionMatch.Call(r.Context(), s.rpc, &args, &out)
	setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err != nil {
		return nil, err
	}
	if len(out.Matches) != len(names) {
		return nil, errors.New("internal error: match response count didn't match input count")
	}
	resp := make(map[string]structs.Intentions, len(names))
	for i, ixns := range out.Matches {
		if ixns == nil {
			ixns = structs.Intentions{}
		}
		resp[names[i]] = ixns
	}
	return resp, nil
}

// intentionCheck serves GET /v1/connect/intentions/check?source=&destination=:
// {"Allowed": bool}.
func (s *Server) intentionCheck(w http.ResponseWriter, r *http.Request) (any, error) {
	args := structs.IntentionQueryRequest{Check: &structs.IntentionQueryCheck{SourceType: structs.IntentionSourceConsul}}
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	q := r.URL.Query()
	if st, ok := q["source-type"]; ok && len(st) > 0 {
		args.Check.SourceType = structs.IntentionSourceType(st[0])
	}
	source, ok := q["source"]
	if !ok || len(source) != 1 {
		return nil, errors.New("required query parameter 'source' not set")
	}
	destination, ok := q["destination"]
	if !ok || len(destination) != 1 {
		return nil, errors.New("required query parameter 'destination' not set")
	}
	var err error
	if args.Check.SourceName, err = parseIntentionName("source", source[0]); err != nil {
		return nil, err
	}
	if args.Check.DestinationName, err = parseIntentionName("destination", destination[0]); err != nil {
		return nil, err
	}
	var out structs.IntentionQueryCheckResponse
	if err := structs.MethodIntentionCheck.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
